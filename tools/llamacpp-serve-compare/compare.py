#!/usr/bin/python3
"""Generation speed of `kvlease serve` beside llama-server, same GGUF file.

For each file, in rounds whose order alternates (round 1 llama.cpp first,
round 2 kvlease first, ...), each server is started alone with the same
threads and, over HTTP (/v1/completions, token-id prompts, temperature 0,
EOS ignored so that every request generates exactly --gen tokens, the
byte tokens 3..258 biased by -100 on both sides, see BANNED):

  - single: one request of a --prompt-len prompt generating --gen tokens,
    generated tokens / its wall time;
  - concurrent: --concurrency requests at once, each its own prompt of
    --prompt-len tokens generating --gen tokens, the total generated tokens
    / the wall time from the first send to the last answer;
  - mixed (with --mixed-prompt N): the concurrent requests streamed, and
    --mixed-delay seconds after each has its first token one N-token
    prompt for one token: the decodes'
    text events per second (a token each, bar a token that ends inside a
    UTF-8 character) before that prompt and while it was in the engine,
    and its time to its token.

llama-server gets --concurrency slots (-np) of --prompt-len + --gen
(+ --mixed-prompt) tokens each (-c the product) and otherwise its
defaults; kvlease serve gets --threads and its defaults. Every request's
completion_tokens is checked to be --gen. The load average is printed
before each measurement: the machine may be shared.

Stdlib only. Needs llama.cpp built (KVLEASE_LLAMACPP, default
/tmp/llamacpp: build/bin/llama-server) and a kvlease binary (--kvlease,
default: built from this checkout with go build). From the repository root:

    /usr/bin/python3 tools/llamacpp-serve-compare/compare.py \\
        --files /tmp/prefill/tiny-q8_0.gguf,/tmp/prefill/tiny-q4_k_m.gguf [--rounds 2] [--mixed-prompt 512]

Exit status 1 if a server fails to start or a request does not generate
--gen tokens.
"""

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

LLAMACPP = os.environ.get("KVLEASE_LLAMACPP", "/tmp/llamacpp")
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# The completion endpoint and body of each side: llama-server's native
# /completion (its /v1/completions parses the random models' output as chat
# content and may refuse it), vLLM's /v1/completions for kvlease.
PATHS = {"llama.cpp": "/completion", "kvlease": "/v1/completions"}


# BANNED are the SentencePiece byte tokens <0x00>..<0xFF> of a llama
# vocabulary: both sides get a logit bias of -100 on them, because random
# weights emit them and llama-server refuses (500) a completion whose text
# its final parse finds malformed.
BANNED = range(3, 259)


def body_for(side, prompt, gen, stream=False):
    if side == "llama.cpp":
        return {"prompt": prompt, "n_predict": gen, "temperature": 0, "ignore_eos": True, "stream": stream,
                "logit_bias": [[t, -100] for t in BANNED]}
    return {"model": "m", "prompt": prompt, "max_tokens": gen, "temperature": 0, "ignore_eos": True, "stream": stream,
            "logit_bias": {str(t): -100 for t in BANNED}}


def post(port, path, body, timeout=1800):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{path} on :{port}: {e.code} {e.read().decode()[:500]}") from None


class Server:
    def __init__(self, side, name, cmd, port, log, env=None):
        self.side, self.name, self.port = side, name, port
        self.log = open(log, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        t0 = time.time()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited at start (log: {log})")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.time() - t0 > 600:
                raise RuntimeError(f"{name} not ready after 600 s (log: {log})")
            time.sleep(0.2)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def request(srv, prompt, gen):
    r = post(srv.port, PATHS[srv.side], body_for(srv.side, prompt, gen))
    n = r["tokens_predicted"] if srv.side == "llama.cpp" else r["usage"]["completion_tokens"]
    if n != gen:
        raise RuntimeError(f"a request generated {n} tokens, not {gen}")
    return n


def concurrent(srv, prompts, gen):
    """Sends every prompt at once; returns (total generated, wall seconds)."""
    done, errs = [], []
    t0 = time.time()

    def one(p):
        try:
            done.append(request(srv, p, gen))
        except Exception as e:  # reported below
            errs.append(e)

    ts = [threading.Thread(target=one, args=(p,)) for p in prompts]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise errs[0]
    return sum(done), time.time() - t0


def stream(srv, prompt, gen, t0, times, started):
    """Streams one request, appending the offset from t0 of every event
    that carries text to times; releases started at the first."""
    body = body_for(srv.side, prompt, gen, stream=True)
    req = urllib.request.Request(f"http://127.0.0.1:{srv.port}{PATHS[srv.side]}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1800) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[5:])
            ch = ev.get("choices") or [{}]
            if ch[0].get("text") or ev.get("content"):
                times.append(time.time() - t0)
                if len(times) == 1:
                    started.release()


def mixed(srv, prompts, gen, delay, long_prompt):
    """Streams every prompt at once and, delay seconds after every one of
    them has its first token, sends long_prompt for one token. Returns (the decodes' text events per second
    while the long prompt was in the engine, the same before it, the long
    prompt's seconds to its token, whether every decode was still running
    when it ended)."""
    errs, times, span, last, first = [], [], [], [], []
    t0 = time.time()

    started = threading.Semaphore(0)

    def one(p):
        try:
            mine = []
            stream(srv, p, gen, t0, mine, started)
            times.extend(mine)
            last.append(mine[-1] if mine else 0)
        except Exception as e:  # reported below
            errs.append(e)
            started.release()

    def late():
        for _ in prompts:  # every decode has its first token
            started.acquire()
        first.append(time.time() - t0)
        time.sleep(delay)
        s = time.time() - t0
        try:
            request(srv, long_prompt, 1)
            span.append((s, time.time() - t0))
        except Exception as e:
            errs.append(e)

    ts = [threading.Thread(target=one, args=(p,)) for p in prompts] + [threading.Thread(target=late)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise errs[0]
    s, e = span[0]
    b = first[0]  # every decode had its first token: the before-window starts there
    during = sum(1 for x in times if s <= x <= e) / (e - s)
    before = sum(1 for x in times if b <= x < s) / max(s - b, 1e-9)
    return during, before, e - s, all(x > e for x in last)


def prompts_for(rng, n, length, vocab):
    return [[1] + [rng.randrange(100, vocab) for _ in range(length - 1)] for _ in range(n)]


def measure(srv, args, rng, vocab):
    out = {}
    # Warm-up: page the weights in, start the workers.
    request(srv, prompts_for(rng, 1, 8, vocab)[0], 4)
    ld = load()
    t0 = time.time()
    request(srv, prompts_for(rng, 1, args.prompt_len, vocab)[0], args.gen)
    out["single"] = (args.gen / (time.time() - t0), ld)
    ld = load()
    n, wall = concurrent(srv, prompts_for(rng, args.concurrency, args.prompt_len, vocab), args.gen)
    out["concurrent"] = (n / wall, ld)
    if args.mixed_prompt:
        ld = load()
        ps = prompts_for(rng, args.concurrency, args.prompt_len, vocab)
        long_p = prompts_for(rng, 1, args.mixed_prompt, vocab)[0]
        out["mixed"] = mixed(srv, ps, args.gen, args.mixed_delay, long_p) + (ld,)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", default="/tmp/prefill/tiny-q8_0.gguf,/tmp/prefill/tiny-q4_k_m.gguf")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--mixed-prompt", type=int, default=0, help="also run the concurrent load with one prompt of this many tokens")
    ap.add_argument("--mixed-delay", type=float, default=5.0, help="seconds after every decode has its first token that the long prompt is sent")
    ap.add_argument("--vocab", type=int, default=32000, help="prompt token ids are drawn below this")
    ap.add_argument("--kvlease", default="", help="kvlease binary; default: go build ./cmd/kvlease")
    ap.add_argument("--kvlease-args", default="", help="more flags for kvlease serve, space-separated")
    ap.add_argument("--llamacpp-args", default="", help="more flags for llama-server, space-separated")
    ap.add_argument("--only", default="", help="llama.cpp or kvlease: run one side only")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "kvlease-serve-compare"))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    kv = args.kvlease
    if not kv:
        kv = os.path.join(args.work, "kvlease")
        subprocess.run(["go", "build", "-o", kv, "./cmd/kvlease"], cwd=ROOT, check=True)
    server = os.path.join(LLAMACPP, "build", "bin", "llama-server")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.join(LLAMACPP, "build", "bin") + ":" + env.get("LD_LIBRARY_PATH", "")
    per_slot = args.prompt_len + args.gen + args.mixed_prompt
    sides = {
        "llama.cpp": lambda f, port, log: Server("llama.cpp", "llama-server", [
            server, "-m", f, "--host", "127.0.0.1", "--port", str(port), "-t", str(args.threads),
            "-np", str(args.concurrency), "-c", str(args.concurrency * per_slot)] + args.llamacpp_args.split(), port, log, env),
        "kvlease": lambda f, port, log: Server("kvlease", "kvlease", [
            kv, "serve", "--model-file", f, "--model", "m", "--port", str(port), "--transfer-port", "0",
            "--threads", str(args.threads)] + args.kvlease_args.split(), port, log),
    }
    names = [s for s in ("llama.cpp", "kvlease") if not args.only or s == args.only]
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC; {args.threads} threads, "
          f"{args.concurrency} concurrent, prompts of {args.prompt_len}, {args.gen} generated each")
    results = {}
    for rnd in range(args.rounds):
        for f in args.files.split(","):
            # Alternate who goes first, across files and rounds alike.
            k = rnd * len(args.files.split(",")) + args.files.split(",").index(f)
            order = names if k % 2 == 0 else names[::-1]
            for side in order:
                rng = random.Random(f"{rnd}/{f}")  # the same prompts on both sides
                log = os.path.join(args.work, f"{side}.{os.path.basename(f)}.r{rnd + 1}.log")
                srv = sides[side](f, free_port(), log)
                try:
                    m = measure(srv, args, rng, args.vocab)
                finally:
                    srv.stop()
                results.setdefault((f, side), []).append(m)
                line = (f"round {rnd + 1} {os.path.basename(f):18} {side:9} single {m['single'][0]:6.2f} tok/s "
                        f"(load {m['single'][1]}), {args.concurrency} concurrent {m['concurrent'][0]:6.2f} tok/s "
                        f"(load {m['concurrent'][1]})")
                if "mixed" in m:
                    during, before, ttft, covered, ld = m["mixed"]
                    line += (f"; decodes {before:6.2f} ev/s before a {args.mixed_prompt}-token prompt, "
                             f"{during:6.2f} while it ran ({ttft:.2f} s to its token"
                             f"{'' if covered else '; some decodes ended before it'}, load {ld})")
                print(line, flush=True)
    if len(names) == 2:
        print("\nratios kvlease / llama.cpp, round by round:")
        for f in args.files.split(","):
            a, b = results[(f, "kvlease")], results[(f, "llama.cpp")]
            for key in ("single", "concurrent"):
                rs = ", ".join(f"{x[key][0] / y[key][0]:.2f}" for x, y in zip(a, b))
                print(f"  {os.path.basename(f):18} {key:10} {rs}")


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:
        print(f"compare: {e}", file=sys.stderr)
        sys.exit(1)
