// tokenize: llama.cpp's own tokenizer (libllama's llama_tokenize) over a
// stream of cases, for regen.py. Usage: tokenize VOCAB.gguf < cases >
// ids. Each case on stdin is a little-endian uint32 byte length, a byte
// add_special (BOS as the vocabulary wants it), a byte parse_special, and
// the text; each answer on stdout is one line of space-separated ids.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *data) {
    (void) level; (void) text; (void) data;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s VOCAB.gguf < cases > ids\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "%s: cannot load\n", argv[1]);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    printf("add_bos %d\n", llama_vocab_get_add_bos(vocab) ? 1 : 0);
    for (;;) {
        unsigned char head[6];
        if (fread(head, 1, 6, stdin) != 6) {
            break;
        }
        uint32_t n = head[0] | head[1] << 8 | head[2] << 16 | (uint32_t) head[3] << 24;
        char *text = malloc(n + 1);
        if (fread(text, 1, n, stdin) != n) {
            fprintf(stderr, "short case\n");
            return 1;
        }
        int32_t cap = (int32_t) n + 8;
        llama_token *ids = malloc(sizeof(llama_token) * cap);
        int32_t k = llama_tokenize(vocab, text, (int32_t) n, ids, cap, head[4], head[5]);
        if (k < 0) {
            cap = -k;
            ids = realloc(ids, sizeof(llama_token) * cap);
            k = llama_tokenize(vocab, text, (int32_t) n, ids, cap, head[4], head[5]);
        }
        for (int32_t i = 0; i < k; i++) {
            printf(i ? " %d" : "%d", ids[i]);
        }
        printf("\n");
        free(ids);
        free(text);
    }
    llama_model_free(model);
    return 0;
}
