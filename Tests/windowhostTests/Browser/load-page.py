#!/usr/bin/env python3
"""Loads a page in headless Chromium, as a person's browser would, and reports what it rendered.

Usage: load-page.py URL UNTIL_EXPRESSION SCREENSHOT_PNG [SECONDS]

Drives Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages
ending in NUL on descriptors 3 and 4), so nothing but the standard library is needed. It opens
URL, evaluates UNTIL_EXPRESSION in the page every 200 ms until it is true (the page's scripts
have run and drawn) or SECONDS pass, saves a screenshot, and prints one JSON object:
{"ready": bool, "html": the DOM as rendered}. Exit 0 when it ran, 2 when Chromium could not
start or answer (the reason on stderr).
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def main():
    url, until, screenshot = sys.argv[1], sys.argv[2], sys.argv[3]
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 30.0
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        print("no chromium on PATH (Debian's chromium package)", file=sys.stderr)
        return 2
    # Chromium writes its profile as it goes: under a umask that takes the owner's write bit
    # (CI runs under 0277) it cannot, and exits at once.
    os.umask(0o077)
    profile = tempfile.TemporaryDirectory(prefix="windowhost-chromium-")
    to_chrome_read, to_chrome_write = os.pipe()
    from_chrome_read, from_chrome_write = os.pipe()

    # Chromium reads the protocol on descriptor 3 and writes on 4: a shell puts the pipes there.
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--remote-debugging-pipe", "--window-size=1400,1100",
             "--user-data-dir=" + profile.name, "about:blank"]
    chrome = subprocess.Popen(
        ["/bin/sh", "-c", 'exec "$0" "$@" 3<&%d 4>&%d' % (to_chrome_read, from_chrome_write), binary] + flags,
        pass_fds=(to_chrome_read, from_chrome_write),
        stdout=subprocess.DEVNULL, stderr=None if os.environ.get("LOAD_PAGE_VERBOSE") else subprocess.DEVNULL)
    os.close(to_chrome_read)
    os.close(from_chrome_write)
    writer = os.fdopen(to_chrome_write, "wb", buffering=0)
    reader = os.fdopen(from_chrome_read, "rb", buffering=0)
    pending = b""
    next_id = [0]

    def call(method, params=None, session=None):
        next_id[0] += 1
        message = {"id": next_id[0], "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        writer.write(json.dumps(message).encode() + b"\0")
        nonlocal pending
        while True:
            while b"\0" in pending:
                raw, pending = pending.split(b"\0", 1)
                answer = json.loads(raw)
                if answer.get("id") == next_id[0]:
                    if "error" in answer:
                        raise RuntimeError(method + ": " + json.dumps(answer["error"]))
                    return answer["result"]
            chunk = reader.read(1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the pipe during " + method)
            pending += chunk

    try:
        target = call("Target.createTarget", {"url": url})["targetId"]
        session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        deadline = time.monotonic() + seconds
        ready = False
        while time.monotonic() < deadline:
            value = call("Runtime.evaluate", {"expression": "Boolean(" + until + ")", "returnByValue": True}, session)
            if value.get("result", {}).get("value") is True:
                ready = True
                break
            time.sleep(0.2)
        html = call("Runtime.evaluate", {"expression": "document.documentElement.outerHTML", "returnByValue": True}, session)["result"]["value"]
        image = call("Page.captureScreenshot", {"format": "png"}, session)["data"]
        with open(screenshot, "wb") as out:
            out.write(base64.b64decode(image))
        print(json.dumps({"ready": ready, "html": html}))
        try:
            call("Browser.close")
        except RuntimeError:
            pass
        return 0
    except (RuntimeError, OSError, ValueError) as error:
        print("chromium: " + str(error), file=sys.stderr)
        return 2
    finally:
        try:
            chrome.wait(timeout=10)
        except subprocess.TimeoutExpired:
            chrome.kill()
            chrome.wait()
        profile.cleanup()


if __name__ == "__main__":
    sys.exit(main())
