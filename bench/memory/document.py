"""Writes a deterministic JSON document shaped like an app's data, for memory measurements.

The same shape as crates/tree/benches/memory.rs: user profiles (a name, an email, a score,
a level, a flag and nested settings) and chat rooms whose messages have push-id keys, a uid,
20-200 characters of text and a timestamp. About a quarter of the bytes are profiles.

Usage: python3 document.py OUT_FILE [MEGABYTES]   (default 50)
"""

import json
import random
import sys

WORDS = "hello the meeting is at noon see you there thanks great idea".split()
PUSH_CHARS = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"


def text(rng, shortest, longest):
    length = rng.randint(shortest, longest)
    out = ""
    while len(out) < length:
        out += rng.choice(WORDS) + " "
    return out[:length]


def push_id(rng, time_ms):
    """Eight characters of time, then twelve random ones, as the SDK makes them."""
    head = "".join(PUSH_CHARS[(time_ms >> (6 * shift)) & 63] for shift in range(7, -1, -1))
    return head + "".join(rng.choice(PUSH_CHARS) for _ in range(12))


def document(target_bytes):
    rng = random.Random(42)
    users, rooms = {}, {}
    size, time_ms, user = 0, 1_700_000_000_000, 0
    room_count = max(1, target_bytes // 200_000)
    while size < target_bytes:
        if user % 4 == 0:
            uid = f"user{user:07d}"
            profile = {
                "name": text(rng, 5, 20),
                "email": f"{uid}@example.com",
                "score": rng.randrange(100_000),
                "level": rng.randrange(50) + 0.5,
                "online": rng.random() < 0.5,
                "settings": {"theme": "dark", "notifications": rng.random() < 0.5, "lang": "en"},
            }
            users[uid] = profile
            size += len(json.dumps(profile)) + len(uid) + 4
        room = f"room{rng.randrange(room_count):05d}"
        time_ms += rng.randrange(5000)
        message = {"uid": f"user{rng.randrange(user + 1):07d}", "text": text(rng, 20, 200), "ts": time_ms}
        rooms.setdefault(room, {"messages": {}})["messages"][push_id(rng, time_ms)] = message
        size += len(json.dumps(message)) + 26
        user += 1
    return {"users": users, "rooms": rooms}


def main():
    out = sys.argv[1]
    megabytes = float(sys.argv[2]) if len(sys.argv) > 2 else 50.0
    with open(out, "w") as f:
        json.dump(document(int(megabytes * 1_000_000)), f, separators=(",", ":"))


if __name__ == "__main__":
    main()
