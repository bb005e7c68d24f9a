"""Reference.listen(): the SDK's server-sent-events client against hearth."""

import queue
import threading

from firebase_admin import db

EVENT_TIMEOUT_S = 10


class Recorder:
    """Collects the events of a listener; `next()` waits for the next one."""

    def __init__(self):
        self.events = queue.Queue()

    def __call__(self, event):
        self.events.put((event.event_type, event.path, event.data))

    def next(self):
        return self.events.get(timeout=EVENT_TIMEOUT_S)


def close(registration):
    """Closes a listener. close() joins the SDK's reader thread, which notices the closed
    response only when the next event or keep-alive arrives (one second in this suite), and
    then fails inside the SDK because the response it was reading is gone (firebase-admin
    7.7.0 reads from the closed response). That reader thread's error is the SDK's, not the
    server's, and is ignored here; any other thread's is reported as usual."""
    reader = registration._thread  # noqa: SLF001 - the SDK's own reader thread
    previous = threading.excepthook

    def hook(args):
        if args.thread is reader and isinstance(args.exc_value, (AttributeError, ValueError)):
            return
        previous(args)

    threading.excepthook = hook
    try:
        closer = threading.Thread(target=registration.close, daemon=True)
        closer.start()
        closer.join(timeout=10)
        assert not closer.is_alive(), "ListenerRegistration.close() did not return"
    finally:
        threading.excepthook = previous


def test_listen_sees_a_put_then_a_patch(root):
    ref = root.child("room")
    ref.set({"topic": "hello", "count": 1})
    recorder = Recorder()
    registration = ref.listen(recorder)
    try:
        assert recorder.next() == ("put", "/", {"topic": "hello", "count": 1})
        ref.child("topic").set("changed")
        assert recorder.next() == ("put", "/topic", "changed")
        ref.update({"count": 2, "extra/deep": True})
        assert recorder.next() == ("patch", "/", {"count": 2, "extra/deep": True})
        ref.delete()
        assert recorder.next() == ("put", "/", None)
    finally:
        close(registration)


def test_listen_on_an_empty_location_and_writes_from_another_app(root, app_factory):
    recorder = Recorder()
    registration = root.child("inbox").listen(recorder)
    try:
        assert recorder.next() == ("put", "/", None)
        other = db.reference("/inbox", app=app_factory())
        key = other.push({"from": "other app"}).key
        assert recorder.next() == ("put", f"/{key}", {"from": "other app"})
    finally:
        close(registration)


def test_many_listeners_see_the_same_write(root):
    ref = root.child("broadcast")
    recorders = [Recorder() for _ in range(10)]
    registrations = [ref.listen(recorder) for recorder in recorders]
    try:
        for recorder in recorders:
            assert recorder.next() == ("put", "/", None)
        ref.set({"message": "to everyone"})
        for recorder in recorders:
            assert recorder.next() == ("put", "/", {"message": "to everyone"})
    finally:
        for registration in registrations:
            close(registration)
