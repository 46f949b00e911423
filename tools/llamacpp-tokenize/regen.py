#!/usr/bin/env python3
"""Regenerates model/gguf/testdata/tokenize/<vocab>.json: llama.cpp's own
token ids for every string of corpus.json, on llama.cpp's vocabularies
(models/ggml-vocab-<vocab>.gguf), for TestTokenizerCorpus.

    python3 tools/llamacpp-tokenize/regen.py /tmp/llamacpp [VOCAB...]

LLAMACPP is a llama.cpp checkout whose libllama is built
(../shared/tools/llamacpp.sh builds it). tokenize.c, compiled here against
it, calls llama_tokenize twice per string: as a prompt (BOS when the
vocabulary adds one, special-token text parsed) and as plain text (no BOS,
special-token text as text).
"""
import json, os, struct, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "model", "gguf", "testdata", "tokenize")
VOCABS = ["llama-bpe", "qwen2", "qwen35", "gpt-2", "mpt", "starcoder", "refact", "command-r", "falcon",
          "llama-spm", "baichuan"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    llama = os.path.abspath(sys.argv[1])
    vocabs = sys.argv[2:] or VOCABS
    commit = subprocess.run(["git", "-C", llama, "log", "-1", "--format=%h"], capture_output=True, text=True,
                            check=True).stdout.strip()
    with open(os.path.join(DATA, "corpus.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    lib = os.path.join(llama, "build", "bin")
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "tokenize")
        subprocess.run(["cc", "-O1", "-o", exe, os.path.join(HERE, "tokenize.c"),
                        "-I" + os.path.join(llama, "include"), "-I" + os.path.join(llama, "ggml", "include"),
                        "-L" + lib, "-lllama", "-Wl,-rpath," + lib], check=True)
        cases = bytearray()
        for c in corpus:
            b = c["text"].encode("utf-8")
            for add, parse in ((1, 1), (0, 0)):
                cases += struct.pack("<IBB", len(b), add, parse) + b
        for v in vocabs:
            name = "ggml-vocab-%s.gguf" % v
            out = subprocess.run([exe, os.path.join(llama, "models", name)], input=bytes(cases),
                                 capture_output=True, check=True).stdout.decode().split("\n")
            add_bos = out[0] == "add_bos 1"
            ids = [[int(x) for x in line.split()] for line in out[1:1 + 2 * len(corpus)]]
            if len(ids) != 2 * len(corpus):
                sys.exit("%s: %d answers for %d cases" % (name, len(ids), 2 * len(corpus)))
            lines = ['{"llama.cpp": %s, "vocab": %s, "add_bos": %s,' % (
                json.dumps(commit), json.dumps(name), json.dumps(add_bos))]
            for key, off in (("prompt", 0), ("plain", 1)):
                rows = [json.dumps(ids[2 * i + off], separators=(",", ":")) for i in range(len(corpus))]
                lines.append('"%s": [\n%s\n]%s' % (key, ",\n".join(rows), "," if key == "prompt" else "}"))
            with open(os.path.join(DATA, v + ".json"), "w") as f:
                f.write("\n".join(lines) + "\n")
            print("%s: %d strings, llama.cpp %s" % (name, len(corpus), commit))


main()
