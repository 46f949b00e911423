#!/bin/sh
# Regenerates small.golden.json: the reference renderer's output for
# small.jinja on every conversation of conversations.json (run from chat/).
set -e
python3 - <<'PY'
import json, subprocess
cases = json.load(open("testdata/conversations.json"))
req = {"template": open("testdata/small.jinja").read(), "now": "2024-07-26T09:30:00",
       "bos_token": "<s>", "eos_token": "</s>", "cases": cases}
out = subprocess.run(["python3", "testdata/hf_render.py"], input=json.dumps([req]).encode(),
                     capture_output=True, check=True).stdout
res = json.loads(out)[0]
with open("testdata/small.golden.json", "w") as f:
    json.dump([dict(name=c["name"], **r) for c, r in zip(cases, res)], f, ensure_ascii=False, indent=1)
    f.write("\n")
PY
