"""Callbacks (acl.rt.subscribe_report / launch_callback / process_report / unsubscribe_report) and
the threads that run them (acl.util.start_thread / stop_thread).

launch_callback queues a task on the stream: when the work before it is done, the callback goes to
the thread subscribed to that stream, which runs it inside its next process_report. A blocking
callback (block_type 1) holds the stream until it has run; a non-blocking one does not."""
from __future__ import annotations

import queue
import threading

from .codes import (ACL_CALLBACK_BLOCK, ACL_ERROR_INVALID_PARAM, ACL_ERROR_REPEAT_SUBSCRIBE,
                    ACL_ERROR_RT_REPORT_TIMEOUT, ACL_ERROR_RT_STREAM_NO_CB_REG, ACL_ERROR_STREAM_NOT_SUBSCRIBE,
                    ACL_ERROR_THREAD_NOT_SUBSCRIBE, acl_call, as_int, fail, log)
from .runtime import stream_of

_threads: dict[int, threading.Thread] = {}
_reports: dict[int, queue.Queue] = {}  # thread id -> callbacks waiting for its process_report
_lock = threading.Lock()


@acl_call("pair", 0)
def start_thread(func, args_list):
    if not callable(func):
        fail(ACL_ERROR_INVALID_PARAM, "start_thread needs a function")
    def run():
        # its report queue from the start: a process_report loop begun before subscribe_report waits
        # out its timeout instead of spinning on "not subscribed"
        with _lock:
            _reports.setdefault(threading.get_ident(), queue.Queue())
        func(args_list)
    t = threading.Thread(target=run, name="acl-thread", daemon=True)
    t.start()
    with _lock:
        _threads[t.ident] = t
    return t.ident


@acl_call("ret")
def stop_thread(thread_id):
    """Waits for the thread to return (the caller has told its loop to stop)."""
    with _lock:
        t = _threads.pop(as_int(thread_id, "thread_id"), None)
    if t is None:
        fail(ACL_ERROR_INVALID_PARAM, f"thread {thread_id} was not started by acl.util.start_thread")
    if t is not threading.current_thread():
        t.join()


@acl_call("ret")
def subscribe_report(thread_id, stream):
    thread_id, s = as_int(thread_id, "thread_id"), stream_of(stream)
    if s.subscriber is not None:
        fail(ACL_ERROR_REPEAT_SUBSCRIBE, f"the stream is subscribed by thread {s.subscriber} already")
    with _lock:
        _reports.setdefault(thread_id, queue.Queue())
    s.subscriber = thread_id


@acl_call("ret")
def unsubscribe_report(thread_id, stream):
    thread_id, s = as_int(thread_id, "thread_id"), stream_of(stream)
    if s.subscriber != thread_id:
        fail(ACL_ERROR_STREAM_NOT_SUBSCRIBE, f"thread {thread_id} is not subscribed to this stream")
    s.subscriber = None


@acl_call("ret")
def launch_callback(fn, user_data, block_type, stream):
    s = stream_of(stream)
    if not callable(fn):
        fail(ACL_ERROR_INVALID_PARAM, "launch_callback needs a function")
    block_type = as_int(block_type, "block_type")
    if s.subscriber is None:
        fail(ACL_ERROR_RT_STREAM_NO_CB_REG, "no thread is subscribed to this stream (acl.rt.subscribe_report)")
    reports = _reports[s.subscriber]

    def hand_over():
        done = threading.Event()
        reports.put((fn, user_data, done))
        if block_type == ACL_CALLBACK_BLOCK:
            done.wait()
    s.launch(hand_over)


@acl_call("ret")
def process_report(timeout):
    """Run the next callback of a stream this thread subscribed to, waiting up to `timeout` ms
    (-1: no limit); ACL_ERROR_RT_REPORT_TIMEOUT when none came."""
    timeout = as_int(timeout, "timeout")
    reports = _reports.get(threading.get_ident())
    if reports is None:
        fail(ACL_ERROR_THREAD_NOT_SUBSCRIBE, "this thread is not subscribed to any stream (acl.rt.subscribe_report)")
    try:
        fn, user_data, done = reports.get(timeout=None if timeout < 0 else timeout / 1000)
    except queue.Empty:
        fail(ACL_ERROR_RT_REPORT_TIMEOUT, f"no callback within {timeout} ms")
    try:
        fn(user_data)
    except Exception as e:  # the user's callback failed: said in the log, the stream goes on
        log.warning("acl callback %s raised %s: %s", getattr(fn, "__name__", fn), type(e).__name__, e)
    finally:
        done.set()
