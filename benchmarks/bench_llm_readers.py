"""Reading top_logprobs records: 1,000,000 chat completions, options A-D (issue 52).

Writes ``--n`` generated chat-completion records (one generated token, its
``top_logprobs`` with ``--top`` entries of ``{token, logprob, bytes}``, as
an OpenAI-compatible API returns them; about 2 kB each) to a JSON Lines
file, then reads them with ``skcal.llm.read_option_logprobs(path,
["A", "B", "C", "D"])`` and, with ``--dicts``, from records already parsed
(a list of dicts: the reader's own work without the JSON parsing). Reported:
wall and CPU time of each read and, as the floor to compare it with in the
same run, of parsing every line and dropping it; the JSON parser used
(orjson when installed, else the standard library); the process's peak
resident memory before and after the read (the reader streams the file:
its arrays grow with the records, not with the file).

The records: the options appear as "A", " A", "a" ... variants at random
ranks of each row's top-k, one of them absent in a tenth of the rows, and
a fiftieth of the rows padded with the -9999 sentinel.

Run:  python benchmarks/bench_llm_readers.py [--n 1000000] [--top 20]
          [--dicts] [--keep FILE]
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import time

import numpy as np

OPTIONS = ["A", "B", "C", "D"]


def _entry(token):
    """The JSON text of a top_logprobs entry, with a slot for its logprob."""
    text = json.dumps(token)
    return (
        '{"token": '
        + text
        + ', "logprob": %r, "bytes": '
        + str(list(token.encode("utf-8")))
        + "}"
    )


#: Entry templates: filler words, and every surface form of each option.
WORDS = [_entry(f" word{j}") for j in range(100)]
FORMS = {
    (o, v): _entry(f) for o in OPTIONS for v, f in enumerate([o, " " + o, o.lower()])
}
HEAD = (
    '{"id": "chatcmpl-%d", "object": "chat.completion", "created": 1733500000, '
    '"model": "bench-model", "choices": [{"index": 0, "message": {"role": '
    '"assistant", "content": %s}, "logprobs": {"content": [%s]}, '
    '"finish_reason": "length"}]}\n'
)


def _record(i, row):
    """One chat-completion record (a JSON line) from a row of random numbers."""
    values, variants, drop, pad = row
    templates = list(WORDS[: len(values)])
    for o, option in enumerate(OPTIONS):
        if o != drop:
            templates[o] = FORMS[option, variants[o]]
    order = np.argsort(-values)
    logprobs = [float(v) for v in values[order]]
    if pad:
        logprobs[-3:] = [-9999.0] * 3
    entries = [templates[j] % v for j, v in zip(order, logprobs)]
    first = entries[0]
    token = json.loads(first)["token"]
    generated = first[:-1] + ', "top_logprobs": [' + ", ".join(entries) + "]}"
    return HEAD % (i, json.dumps(token), generated)


def _write(path, n, top, seed=0):
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as f:
        for start in range(0, n, 10_000):
            m = min(10_000, n - start)
            logits = rng.normal(0, 2, size=(m, top))
            # 5% of the mass left to the tokens outside the top-k
            values = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True) / 0.95)
            variants = rng.integers(0, 3, size=(m, 4))
            drop = np.where(rng.random(m) < 0.1, rng.integers(0, 4, m), -1)
            pad = rng.random(m) < 0.02
            rows = zip(values, variants, drop, pad)
            f.writelines(_record(start + i, row) for i, row in enumerate(rows))


def _peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(label, fn):
    from skcal.llm import read_option_logprobs

    before = _peak_mib()
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(read_option_logprobs)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"{label:<34} {len(result):>9,} rows  wall {wall:7.2f} s  cpu {cpu:7.2f} s  "
        f"peak RSS {before:7.0f} -> {_peak_mib():7.0f} MiB"
    )
    return result


def _parse_only(path):
    """The floor under load: parse every line with the reader's JSON parser
    and drop it (same run, same file, so the two times compare)."""
    try:
        from orjson import loads
    except ImportError:
        from json import loads
    wall, cpu = time.perf_counter(), time.process_time()
    with open(path, "rb") as f:
        for line in f:
            loads(line)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    label = "parsing alone (the floor)"
    print(f"{label:<34} {'':>14}  wall {wall:7.2f} s  cpu {cpu:7.2f} s")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--dicts", action="store_true", help="also read parsed dicts")
    parser.add_argument(
        "--keep", help="write the records here and keep them (reused if present)"
    )
    args = parser.parse_args(argv)

    try:
        import orjson  # noqa: F401

        parser_name = "orjson"
    except ImportError:
        parser_name = "json (standard library)"
    directory = tempfile.mkdtemp()
    path = args.keep or os.path.join(directory, "records.jsonl")
    t = time.perf_counter()
    if args.keep and os.path.exists(args.keep):
        print(f"reading the records of {args.keep} (delete it to write new ones)")
    else:
        _write(path, args.n, args.top)
    size = os.path.getsize(path) / 2**20
    print(
        f"{args.n:,} records ({size:,.0f} MiB) written in "
        f"{time.perf_counter() - t:.1f} s; JSON parser: {parser_name}"
    )
    _parse_only(path)
    result = _timed("read_option_logprobs(path, A-D)", lambda read: read(path, OPTIONS))
    print(
        f"absent options: {result.absent.mean():.3%} of cells; mean leftover "
        f"mass {np.exp(result.rest_logmass).mean():.4f}"
    )
    if args.dicts:
        loads = json.loads
        with open(path, encoding="utf-8") as f:
            records = [loads(line) for line in f]
        _timed("read_option_logprobs(dicts, A-D)", lambda read: read(records, OPTIONS))
    if not args.keep:
        os.remove(path)
        os.rmdir(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
