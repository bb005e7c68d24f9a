"""Writes deterministic JSON documents of the shapes real databases have, for memory measurements.

Shapes (sizes at the default scale):
  reference  a nested reference dataset, like a browser-compatibility table: features nested a
             few levels deep, each with a record of a handful of repeated key names (support per
             browser, status flags), short strings and booleans; about 20 MB, 850,000 keys.
  records    an array of 200,000 small records of 3 numeric fields (sensor readings); 9.9 MB.
  feed       a chat or activity feed: a map of push-id keys to small records (a uid, a short
             text, a timestamp, a flag); about 20 MB.

Usage: python3 shapes.py SHAPE OUT_FILE [MEGABYTES]   (default: the size above)
"""

import json
import random
import sys

from document import push_id, text

BROWSERS = ["chrome", "chrome_android", "edge", "firefox", "firefox_android", "ie", "oculus",
            "opera", "opera_android", "safari", "safari_ios", "samsunginternet_android",
            "webview_android", "webview_ios"]
DEFAULT_MB = {"reference": 20.6, "records": 9.9, "feed": 20.0}


def name(rng):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 14)))


def support(rng):
    """Per browser: the version that added the feature, or false, sometimes with a flag."""
    out = {}
    for browser in BROWSERS:
        roll = rng.random()
        if roll < 0.1:
            entry = {"version_added": False}
        elif roll < 0.15:
            entry = {"version_added": "preview"}
        else:
            entry = {"version_added": f"{rng.randint(1, 130)}" if roll < 0.85
                     else f"{rng.randint(1, 18)}.{rng.randint(0, 9)}"}
        if rng.random() < 0.08:
            entry["partial_implementation"] = True
        if rng.random() < 0.04:
            entry["version_removed"] = f"{rng.randint(1, 130)}"
        out[browser] = entry
    return out


def compat(rng, path):
    record = {
        "source_file": path.split("/")[0] + "/" + path.split("/")[1] + ".json",
        "status": {"deprecated": rng.random() < 0.1, "experimental": rng.random() < 0.2,
                   "standard_track": rng.random() < 0.85},
        "support": support(rng),
    }
    if rng.random() < 0.85:
        record["spec_url"] = "https://example.org/spec/#" + path.replace("/", "-").lower()
    if rng.random() < 0.8:
        record["tags"] = {"0": "web-features:" + path.split("/")[1].lower()}
    return record


def reference(target):
    rng = random.Random(7)
    doc, size = {}, 0
    categories = ["api", "css", "html", "http", "javascript", "svg", "webextensions"]
    while size < target:
        category = doc.setdefault(rng.choice(categories), {})
        feature_name = name(rng).capitalize()
        path = f"{rng.choice(categories)}/{feature_name}"
        feature = {"__compat": compat(rng, path)}
        for _ in range(rng.randint(0, 12)):
            sub = name(rng)
            feature[sub] = {"__compat": compat(rng, f"{path}/{sub}")}
        category[feature_name] = feature
        size += len(json.dumps(feature, separators=(",", ":"))) + len(feature_name) + 4
    return doc


def records(target):
    rng = random.Random(11)
    count = int(200_000 * target / DEFAULT_MB["records"] / 1e6)
    return [{"lat": round(rng.uniform(-90, 90), 5), "lng": round(rng.uniform(-180, 180), 5),
             "t": 1_700_000_000 + i * 60 + rng.randrange(60)} for i in range(count)]


def feed(target):
    rng = random.Random(13)
    doc, size, time_ms = {}, 0, 1_700_000_000_000
    while size < target:
        time_ms += rng.randrange(3000)
        item = {"uid": f"u{rng.randrange(5000):05d}", "text": text(rng, 5, 60), "ts": time_ms}
        if rng.random() < 0.3:
            item["seen"] = rng.random() < 0.5
        doc[push_id(rng, time_ms)] = item
        size += len(json.dumps(item, separators=(",", ":"))) + 24
    return {"feed": doc}


def main():
    shape, out = sys.argv[1], sys.argv[2]
    megabytes = float(sys.argv[3]) if len(sys.argv) > 3 else DEFAULT_MB[shape]
    build = {"reference": reference, "records": records, "feed": feed}[shape]
    with open(out, "w") as f:
        json.dump(build(int(megabytes * 1_000_000)), f, separators=(",", ":"))


if __name__ == "__main__":
    main()
