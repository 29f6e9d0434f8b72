#!/usr/bin/env python3
"""A strict parser of the Prometheus text exposition format (0.0.4).

    prom_parse.py FILE        print the families as JSON, exit 0; or print
                              why the text is malformed, exit 1
    prom_parse.py --self-test check the parser refuses what it must

Stricter than Prometheus itself, on purpose: the text must end in a
newline; no blank lines; every family has exactly one HELP then one TYPE
line before its samples, and its samples are contiguous; a type is one of
counter, gauge, histogram, untyped (tarmac exports no summaries); a
counter's name ends in _total and its values are >= 0; a histogram NAME
has only NAME_bucket (with an "le" label), NAME_sum and NAME_count
samples, and per label set its buckets come in increasing "le" order,
are cumulative (never decreasing), end with le="+Inf", whose value equals
NAME_count, with one NAME_sum; names and label
names follow the format's grammar; label values use only the escapes \\\\,
\\" and \\n; no label repeats in a sample, no series repeats in a family;
values parse as Go's ParseFloat would (NaN, +Inf, -Inf included); no
timestamps (tarmac gives none).

JSON: {"<family>": {"type": ..., "help": ...,
                    "samples": [{"labels": {...}, "value": <float>}]}}
(a histogram's samples also carry "name": NAME_bucket, NAME_sum or
NAME_count)
(non-finite values are written as the strings "NaN", "+Inf", "-Inf").
"""
import json
import math
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
FLOAT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|Inf|NaN)\Z")
TYPES = ("counter", "gauge", "histogram", "untyped")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


class ParseError(Exception):
    pass


def parse_labels(s, lineno):
    """s starts just after '{'; returns (labels, rest after '}')."""
    labels = {}
    i = 0
    while True:
        if i < len(s) and s[i] == "}":
            return labels, s[i + 1:]
        m = re.match(r"[a-zA-Z_][a-zA-Z0-9_]*", s[i:])
        if not m:
            raise ParseError(f"line {lineno}: bad label name at {s[i:i + 20]!r}")
        name = m.group(0)
        i += len(name)
        if s[i:i + 2] != '="':
            raise ParseError(f"line {lineno}: label {name}: expected =\"")
        i += 2
        value = []
        while True:
            if i >= len(s):
                raise ParseError(f"line {lineno}: label {name}: unterminated value")
            ch = s[i]
            if ch == "\\":
                nxt = s[i + 1:i + 2]
                if nxt == "\\":
                    value.append("\\")
                elif nxt == '"':
                    value.append('"')
                elif nxt == "n":
                    value.append("\n")
                else:
                    raise ParseError(f"line {lineno}: label {name}: bad escape \\{nxt}")
                i += 2
            elif ch == '"':
                i += 1
                break
            else:
                value.append(ch)
                i += 1
        if name in labels:
            raise ParseError(f"line {lineno}: label {name} given twice")
        if name == "__name__" or name.startswith("__"):
            raise ParseError(f"line {lineno}: reserved label name {name}")
        labels[name] = "".join(value)
        if i < len(s) and s[i] == ",":
            i += 1
            if i < len(s) and s[i] == "}":
                raise ParseError(f"line {lineno}: trailing comma in labels")
        elif i < len(s) and s[i] == "}":
            pass
        else:
            raise ParseError(f"line {lineno}: expected , or }} after label {name}")


def parse_value(v, lineno):
    if not FLOAT.match(v):
        raise ParseError(f"line {lineno}: bad value {v!r}")
    if v.lstrip("+-") == "Inf":
        return -math.inf if v.startswith("-") else math.inf
    return float(v)


def parse(text):
    if not text.endswith("\n"):
        raise ParseError("the text does not end in a newline")
    families = {}
    done = set()        # families whose samples have ended
    current = None      # the family whose samples may follow
    pending_help = {}
    for lineno, line in enumerate(text[:-1].split("\n"), 1):
        if line == "":
            raise ParseError(f"line {lineno}: blank line")
        if line != line.strip(" \t") or "\t" in line or "\r" in line:
            raise ParseError(f"line {lineno}: stray white space")
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) < 3 or parts[0] != "#" or parts[1] not in ("HELP", "TYPE"):
                raise ParseError(f"line {lineno}: comment lines are not allowed here: {line!r}")
            kind, name = parts[1], parts[2]
            if not NAME.match(name):
                raise ParseError(f"line {lineno}: bad metric name {name!r}")
            if name in families or name in done:
                raise ParseError(f"line {lineno}: {kind} for {name} after its samples or TYPE")
            if kind == "HELP":
                if len(parts) != 4 or not parts[3]:
                    raise ParseError(f"line {lineno}: HELP for {name} without text")
                if name in pending_help:
                    raise ParseError(f"line {lineno}: second HELP for {name}")
                pending_help[name] = parts[3]
            else:
                if len(parts) != 4 or parts[3] not in TYPES:
                    raise ParseError(f"line {lineno}: bad TYPE line {line!r}")
                if name not in pending_help:
                    raise ParseError(f"line {lineno}: TYPE for {name} before its HELP")
                if parts[3] == "counter" and not name.endswith("_total"):
                    raise ParseError(f"line {lineno}: counter {name} does not end in _total")
                if current is not None:
                    done.add(current)
                families[name] = {"type": parts[3], "help": pending_help.pop(name),
                                  "samples": []}
                current = name
            continue
        m = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
        if not m:
            raise ParseError(f"line {lineno}: bad sample {line!r}")
        name = m.group(0)
        rest = line[len(name):]
        if (current is not None and families[current]["type"] == "histogram"
                and name in (current + sfx for sfx in HISTOGRAM_SUFFIXES)):
            pass
        elif name != current or (current is not None and families[current]["type"] == "histogram"):
            raise ParseError(f"line {lineno}: sample of {name} outside its family "
                             f"(HELP and TYPE first, samples together)")
        labels = {}
        if rest.startswith("{"):
            labels, rest = parse_labels(rest[1:], lineno)
        if not rest.startswith(" ") or rest.startswith("  "):
            raise ParseError(f"line {lineno}: expected one space before the value")
        fields = rest[1:].split(" ")
        if len(fields) != 1:
            raise ParseError(f"line {lineno}: timestamps or extra fields: {rest!r}")
        value = parse_value(fields[0], lineno)
        fam = families[current]
        if fam["type"] == "counter" and not value >= 0:
            raise ParseError(f"line {lineno}: counter {name} has value {fields[0]}")
        sample = {"labels": labels, "value": value}
        if fam["type"] == "histogram":
            sample["name"] = name
            check_histogram_sample(current, sample, lineno)
        key = (name, tuple(sorted(labels.items())))
        if any((s.get("name", current), tuple(sorted(s["labels"].items()))) == key
               for s in fam["samples"]):
            raise ParseError(f"line {lineno}: series {name}{labels} repeated")
        fam["samples"].append(sample)
    if pending_help:
        raise ParseError(f"HELP without TYPE: {', '.join(sorted(pending_help))}")
    for name, fam in families.items():
        if fam["type"] == "histogram":
            check_histogram(name, fam["samples"])
    return families


def check_histogram_sample(family, sample, lineno):
    """One sample of a histogram: le on buckets only, counts >= 0."""
    name, labels, value = sample["name"], sample["labels"], sample["value"]
    if name == family + "_bucket":
        if "le" not in labels:
            raise ParseError(f"line {lineno}: bucket of {family} without an le label")
        parse_value(labels["le"], lineno)
    elif "le" in labels:
        raise ParseError(f"line {lineno}: {name} has an le label")
    if name != family + "_sum" and not (value >= 0 and not math.isinf(value)):
        raise ParseError(f"line {lineno}: {name} has value {value}")


def check_histogram(family, samples):
    """Per label set (le aside): increasing le, cumulative buckets ending
    at +Inf equal to _count, one _sum."""
    groups = {}
    for s in samples:
        key = tuple(sorted((k, v) for k, v in s["labels"].items() if k != "le"))
        g = groups.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if s["name"].endswith("_bucket"):
            g["buckets"].append((parse_value(s["labels"]["le"], 0), s["value"]))
        elif s["name"].endswith("_sum"):
            g["sum"] = s["value"]
        else:
            g["count"] = s["value"]
    for key, g in groups.items():
        where = f"histogram {family}{dict(key)}"
        if not g["buckets"] or g["buckets"][-1][0] != math.inf:
            raise ParseError(f"{where}: no le=\"+Inf\" bucket last")
        for (le0, v0), (le1, v1) in zip(g["buckets"], g["buckets"][1:]):
            if not le1 > le0:
                raise ParseError(f"{where}: le {le1} after {le0}")
            if v1 < v0:
                raise ParseError(f"{where}: bucket le={le1} holds {v1}, less than le={le0}'s {v0}")
        if g["sum"] is None or g["count"] is None:
            raise ParseError(f"{where}: _sum or _count missing")
        if g["count"] != g["buckets"][-1][1]:
            raise ParseError(f"{where}: _count {g['count']} differs from the +Inf bucket")


def to_json(families):
    def enc(v):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "+Inf" if v > 0 else "-Inf"
        return v
    def sample(s):
        out = {"labels": s["labels"], "value": enc(s["value"])}
        if "name" in s:
            out["name"] = s["name"]
        return out
    return json.dumps({n: {"type": f["type"], "help": f["help"],
                           "samples": [sample(s) for s in f["samples"]]}
                       for n, f in families.items()}, sort_keys=True)


GOOD = ('# HELP a_total Things.\n# TYPE a_total counter\na_total{x="1",y="q\\"\\\\\\n"} 3\n'
        'a_total{x="2"} 0.5\n# HELP b Gauge.\n# TYPE b gauge\nb -1e+20\nb{z="NaN"} NaN\n'
        '# HELP h_seconds H.\n# TYPE h_seconds histogram\nh_seconds_bucket{le="0.5"} 1\n'
        'h_seconds_bucket{le="1"} 3\nh_seconds_bucket{le="+Inf"} 4\nh_seconds_sum 7.5\n'
        'h_seconds_count 4\n')
H = "# HELP h H.\n# TYPE h histogram\n"
BAD = [
    ("no final newline", "# HELP b B.\n# TYPE b gauge\nb 1"),
    ("blank line", "# HELP b B.\n# TYPE b gauge\n\nb 1\n"),
    ("no TYPE", "# HELP b B.\nb 1\n"),
    ("no HELP", "# TYPE b gauge\nb 1\n"),
    ("TYPE twice", "# HELP b B.\n# TYPE b gauge\n# TYPE b gauge\nb 1\n"),
    ("bad type", "# HELP b B.\n# TYPE b histo\nb 1\n"),
    ("counter name", "# HELP b B.\n# TYPE b counter\nb 1\n"),
    ("negative counter", "# HELP b_total B.\n# TYPE b_total counter\nb_total -1\n"),
    ("repeated series", "# HELP b B.\n# TYPE b gauge\nb{x=\"1\"} 1\nb{x=\"1\"} 2\n"),
    ("repeated label", "# HELP b B.\n# TYPE b gauge\nb{x=\"1\",x=\"2\"} 1\n"),
    ("bad escape", "# HELP b B.\n# TYPE b gauge\nb{x=\"\\t\"} 1\n"),
    ("unterminated", "# HELP b B.\n# TYPE b gauge\nb{x=\"1} 1\n"),
    ("trailing comma", "# HELP b B.\n# TYPE b gauge\nb{x=\"1\",} 1\n"),
    ("bad value", "# HELP b B.\n# TYPE b gauge\nb 1,5\n"),
    ("timestamp", "# HELP b B.\n# TYPE b gauge\nb 1 1700000000\n"),
    ("two spaces", "# HELP b B.\n# TYPE b gauge\nb  1\n"),
    ("bad name", "# HELP 1b B.\n# TYPE 1b gauge\n1b 1\n"),
    ("bad label name", "# HELP b B.\n# TYPE b gauge\nb{1x=\"1\"} 1\n"),
    ("scattered", "# HELP b B.\n# TYPE b gauge\nb 1\n# HELP c C.\n# TYPE c gauge\nc 1\nb{x=\"2\"} 1\n"),
    ("foreign sample", "# HELP b B.\n# TYPE b gauge\nc 1\n"),
    ("free comment", "# HELP b B.\n# TYPE b gauge\n# hello\nb 1\n"),
    ("bare histogram sample", H + 'h 1\n'),
    ("histogram suffix", H + 'h_bucket{le="+Inf"} 1\nh_total 1\nh_sum 1\nh_count 1\n'),
    ("bucket without le", H + 'h_bucket 1\nh_sum 1\nh_count 1\n'),
    ("le on count", H + 'h_bucket{le="+Inf"} 1\nh_sum 1\nh_count{le="1"} 1\n'),
    ("no +Inf bucket", H + 'h_bucket{le="1"} 1\nh_sum 1\nh_count 1\n'),
    ("le decreasing", H + 'h_bucket{le="2"} 1\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 1\n'
     'h_sum 1\nh_count 1\n'),
    ("not cumulative", H + 'h_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n'),
    ("count differs", H + 'h_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n'),
    ("no sum", H + 'h_bucket{le="+Inf"} 2\nh_count 2\n'),
    ("negative bucket", H + 'h_bucket{le="+Inf"} -1\nh_sum 1\nh_count -1\n'),
    ("histogram after others", H + 'h_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n'
     '# HELP b B.\n# TYPE b gauge\nb 1\nh_sum 2\n'),
]


def self_test():
    fams = parse(GOOD)
    assert fams["a_total"]["samples"][0]["labels"] == {"x": "1", "y": 'q"\\\n'}, fams
    assert fams["a_total"]["samples"][1]["value"] == 0.5
    assert fams["b"]["samples"][0]["value"] == -1e20
    assert math.isnan(fams["b"]["samples"][1]["value"])
    assert [s["value"] for s in fams["h_seconds"]["samples"]] == [1, 3, 4, 7.5, 4]
    assert fams["h_seconds"]["samples"][2]["name"] == "h_seconds_bucket"
    bad = 0
    for what, text in BAD:
        try:
            parse(text)
        except ParseError:
            continue
        print(f"FAIL: accepted ({what}): {text!r}")
        bad += 1
    print(f"prom_parse self-test: {len(BAD)} malformed inputs, {bad} accepted")
    return 1 if bad else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    try:
        families = parse(text)
    except ParseError as e:
        print(f"malformed exposition: {e}", file=sys.stderr)
        return 1
    print(to_json(families))
    return 0


if __name__ == "__main__":
    sys.exit(main())
