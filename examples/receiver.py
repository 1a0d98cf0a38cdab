#!/usr/bin/env python3
"""Submit a task with a webhook, receive and verify its notification, and save the output.

Python 3.8 or later, standard library only. What each step does, and why, is in
docs/webhooks.md. Against the mock service:

    genapi mock > mock.env &          # wait for its "# genapi mock ready" line
    . ./mock.env                      # GENAPI_BASE_URL and GENAPI_API_KEY
    export GENAPI_WEBHOOK_SECRET="whsec_$(python3 -c 'import base64,secrets; print(base64.b64encode(secrets.token_bytes(32)).decode())')"
    python3 examples/receiver.py --prompt "a lighthouse at dusk" --out .

The key and the secret are read from the environment, never from the command line
(other users of the machine can read a process's arguments).

The key goes only to the origins configured: the base URL's (GENAPI_BASE_URL) and,
when set, the regional base URL's (GENAPI_REGIONAL_BASE_URL), each the same scheme,
host and port exactly. A `polling_url` anywhere else (another host of the same parent
domain too: `attacker.herokuapp.com` beside `you.herokuapp.com`) is not sent the key;
the task is polled at the base URL's `get_result` instead.

It prints `listening URL` once the receiver is up, `submitted ID` once the task is
accepted and `saved PATH` at the end; exit 0 then, 1 when the task failed, 2 on a
usage error or when nothing came within --timeout.
"""

import argparse
import base64
import hashlib
import hmac
import http.server
import ipaddress
import json
import os
import queue
import re
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

# Standard Webhooks: a timestamp further than this from our clock is refused,
# so a recorded delivery cannot be replayed later.
TOLERANCE_SECONDS = 300
# A notification is a few hundred bytes; refuse to read more than this.
MAX_BODY_BYTES = 1 << 20
# An output is a few megabytes (a video more); stop reading beyond this.
MAX_DOWNLOAD_BYTES = 512 << 20
# Polling statuses that end a task (any other value means "keep polling").
FAILED_STATUSES = {"Error", "Failed", "Request Moderated", "Content Moderated", "Task not found"}
# A connection that sends nothing for this long is closed.
READ_TIMEOUT_SECONDS = 10


class NoRedirects(urllib.request.HTTPRedirectHandler):
    """Refuses every redirect: the key (on API calls) must not follow one to
    another host, and a signed output address is fetched where it points."""

    def redirect_request(self, *args, **kwargs):
        return None


def opener(redirects):
    """An opener of http and https alone (no file:, ftp: or data: address is
    ever opened), following redirects or refusing them."""
    made = urllib.request.OpenerDirector()
    for handler in (urllib.request.HTTPHandler, urllib.request.HTTPSHandler,
                    urllib.request.HTTPRedirectHandler if redirects else NoRedirects,
                    urllib.request.HTTPErrorProcessor, urllib.request.HTTPDefaultErrorHandler):
        made.add_handler(handler())
    return made


# API calls carry the key: they follow no redirect (urllib would send the key on).
API = opener(redirects=False)
# Downloads carry no key, and an output's host may redirect to where it is kept.
DOWNLOADS = opener(redirects=True)


class Rejected(Exception):
    """A delivery that does not prove it came from the service."""


def signing_key(secret):
    """The HMAC key: the base64-decoded part of a `whsec_` secret, else the secret's bytes."""
    if secret.startswith("whsec_"):
        return base64.b64decode(secret[len("whsec_"):], validate=True)
    return secret.encode()


def verify(secret, headers, body, accept_echo=False, now=None):
    """Checks a delivery's headers against its raw body; raises Rejected if it fails.

    With the Standard Webhooks headers the signature must verify (never falling back
    to the echoed secret). Without them, the service's `X-Webhook-Secret` echo is
    taken only when `accept_echo` is set: anyone who saw one delivery knows it.
    """
    message_id = headers.get("webhook-id")
    timestamp = headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if message_id is None and timestamp is None and signatures is None:
        echoed = headers.get("x-webhook-secret")
        if accept_echo and echoed is not None and hmac.compare_digest(echoed.encode(), secret.encode()):
            return
        raise Rejected("no signature" + ("" if accept_echo else " (echoed secrets are not accepted)"))
    if not (message_id and timestamp and signatures):
        raise Rejected("a Standard Webhooks header is missing")
    if not timestamp.isdigit():
        raise Rejected("the timestamp is not a number")
    now = time.time() if now is None else now
    if abs(now - int(timestamp)) > TOLERANCE_SECONDS:
        raise Rejected("the timestamp is too old or too new")
    signed = message_id.encode() + b"." + timestamp.encode() + b"." + body
    digest = hmac.new(signing_key(secret), signed, hashlib.sha256).digest()
    expected = base64.b64encode(digest)
    for candidate in signatures.split(" "):
        version, _, signature = candidate.partition(",")
        # compare_digest is constant-time and false for different lengths,
        # so a bare "v1," never matches.
        if version == "v1" and hmac.compare_digest(signature.encode(), expected):
            return
    raise Rejected("no signature matches")


def make_handler(secret, accept_echo, deliveries):
    """A request handler that verifies each POST and hands verified ones over."""
    seen_ids = set()

    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = READ_TIMEOUT_SECONDS  # a sender that stalls is not waited for

        def do_POST(self):
            length = self.headers.get("content-length", "")
            if not length.isdigit() or int(length) > MAX_BODY_BYTES:
                return self.answer(413 if length.isdigit() else 411)
            body = self.rfile.read(int(length))
            try:
                verify(secret, self.headers, body, accept_echo)
                notification = json.loads(body)
            except Rejected as why:
                print("rejected a delivery:", why, file=sys.stderr)
                return self.answer(401)
            except ValueError:
                return self.answer(400)
            # Answer at once; the work happens on the main thread. A retry of a
            # delivery already taken (same webhook-id) is answered, not redone.
            self.answer(204)
            message_id = self.headers.get("webhook-id")
            if message_id is None or message_id not in seen_ids:
                seen_ids.add(message_id)
                deliveries.put(notification)

        def answer(self, status):
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass  # Every request would be printed otherwise.

    return Handler


def call(url, key=None, body=None):
    """GET (or POST a JSON body to) `url`, sending the key only when given; the JSON answer."""
    headers = {"accept": "application/json"}
    if key is not None:
        headers["x-key"] = key
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["content-type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=headers)
    with API.open(request, timeout=30) as response:
        return json.load(response)


DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url):
    """An address's origin as compared: (scheme, host without a trailing dot, port),
    the port written out; None for an address that is not http or https, has no
    host, or carries a user or password (`https://user@host`), which is never trusted."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except (AttributeError, ValueError):
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    if scheme not in DEFAULT_PORTS or not host or "@" in parts.netloc:
        return None
    return (scheme, host, port if port is not None else DEFAULT_PORTS[scheme])


def may_have_the_key(url, base_url, regional_base_url=None):
    """Whether the key may go to `url`: only when its origin is exactly a configured
    one, the base URL's or the regional base URL's (GENAPI_REGIONAL_BASE_URL).

    No host is trusted for sharing a domain with the base host: under a platform's
    domain (herokuapp.com, ngrok-free.app, s3.amazonaws.com, azurewebsites.net,
    nip.io) anyone can have a neighbour host, and a `polling_url` pointing there
    would take the key. A regional polling host is trusted only once configured."""
    wanted = origin(url)
    configured = {origin(base) for base in (base_url, regional_base_url) if base}
    return wanted is not None and wanted in configured


def poll(args, task):
    """The task's state: its `polling_url` when one came back on a configured origin
    (`may_have_the_key`), else the fallback `get_result` at the base URL with the id."""
    url = task.get("polling_url")
    if not url or not may_have_the_key(url, args.base_url, args.regional_base_url):
        query = urllib.parse.urlencode({"id": task["id"]})
        url = args.base_url.rstrip("/") + "/v1/get_result?" + query
    try:
        return call(url, key=args.key)
    except urllib.error.HTTPError as error:
        # 404 or 202 right after submission, 503 under load: ask again later.
        if error.code in (202, 404, 429, 503):
            return {"status": "Pending"}
        raise


def outcome(args, task, deliveries):
    """Waits for the task's notification, polling now and then in case it never
    comes; the `result` on success, else raises SystemExit with why it failed."""
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        try:
            notification = deliveries.get(timeout=args.poll_every)
        except queue.Empty:
            state = poll(args, task)
            status = state.get("status")
            if status == "Ready":
                return state["result"]
            if status in FAILED_STATUSES:
                raise SystemExit(failed(task["id"], status, state.get("details"), (args.secret, args.key)))
            continue
        if notification.get("task_id", notification.get("id")) != task["id"]:
            continue
        if notification.get("status") in ("SUCCESS", "Ready"):
            return notification["result"]
        error = notification.get("error") or {}
        raise SystemExit(
            failed(task["id"], error.get("status", notification.get("status")), error.get("details"), (args.secret, args.key))
        )
    print("nothing came within", args.timeout, "seconds for task", task["id"], file=sys.stderr)
    raise SystemExit(2)


def refusal(body, secrets):
    """What a refused submission's answer says, as it may be printed: for a
    validation error, each field it names and the kind of error, as
    `body.image (missing)`. Nothing the service wrote as free text is shown,
    neither `input` nor `msg`: either may quote the submission, webhook
    secret included, in any encoding. A part of a field's `loc` is shown
    when it is an index or a name as the service's fields are written
    (`webhook_url`), else as `?`; and nothing is shown when what would be
    holds eight letters or digits in a row of a secret, in any case or
    encoding (`quotes_a_secret`)."""
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        detail = None
    if not isinstance(detail, list):
        return "(the answer is not shown: it may quote the submission, webhook secret included)"
    fields = []
    for item in detail:
        if not isinstance(item, dict):
            continue
        loc = item.get("loc") if isinstance(item.get("loc"), list) else []
        name = ".".join(
            str(part) if (isinstance(part, int) and not isinstance(part, bool))
            or (isinstance(part, str) and re.fullmatch(r"[a-z][a-z0-9_]{0,31}", part)) else "?"
            for part in loc
        )
        kind = item.get("type")
        kind = kind if isinstance(kind, str) and re.fullmatch(r"[a-z_]{1,32}", kind) else None
        fields.append("{} ({})".format(name or "?", kind) if kind else name or "?")
    said = "; ".join(fields) or "(no field named)"
    if quotes_a_secret(said, secrets):
        return "(the answer is not shown: it quotes part of a secret)"
    return said


def spellings_of(secret):
    """The forms a secret may come back in: as sent, its key part after
    `whsec_` (and the bytes that part encodes), each percent-encoded, and
    the bytes of each as hex, base32 and base64 (standard and URL-safe)."""
    secret = secret or ""
    forms = [secret]
    if secret.startswith("whsec_"):
        forms.append(secret[len("whsec_"):])
    raw = [form.encode() for form in forms]
    for form in forms[1:]:
        try:
            raw.append(base64.b64decode(form + "=" * (-len(form) % 4), validate=False))
        except (ValueError, TypeError):
            pass
    spellings = set(forms)
    for data in raw:
        spellings.update({urllib.parse.quote(data, safe=""), data.hex()})
        # Base64 and base32 at every alignment a longer text may put the
        # secret at, without the characters its neighbours change.
        for encode, group, width in (
            (base64.b64encode, 3, 4),
            (base64.urlsafe_b64encode, 3, 4),
            (base64.b32encode, 5, 8),
        ):
            for before in range(group):
                written = encode(b"\0" * before + data).decode().rstrip("=")
                start = width if before else 0
                end = len(written) - (0 if (before + len(data)) % group == 0 else width)
                if end - start >= 8:
                    spellings.add(written[start:end])
    return spellings


def quotes_a_secret(text, secrets):
    """Whether `text` holds eight letters or digits in a row of any spelling
    of a secret (`spellings_of`), compared without case and with other
    characters ignored: a secret split, spaced out, recased or encoded is
    still found."""
    letters = "".join(c for c in text if c.isalnum()).lower()
    for secret in secrets:
        for spelling in spellings_of(secret):
            spelling = "".join(c for c in spelling if c.isalnum()).lower()
            spelling = spelling[len("whsec"):] if spelling.startswith("whsec") else spelling
            if any(spelling[at:at + 8] in letters for at in range(len(spelling) - 7)):
                return True
    return False


def without_secrets(text, secrets):
    """`text` with each secret (and a webhook secret's key part after `whsec_`) replaced,
    and characters that could reach a terminal as commands made spaces."""
    for secret in secrets:
        secret = secret or ""
        key_part = secret[len("whsec_"):] if secret.startswith("whsec_") else secret
        for form in (secret, key_part):
            if form:
                text = re.sub(re.escape(form), "[redacted]", text, flags=re.IGNORECASE)
    return "".join(" " if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in str(text))


def failed(task_id, status, details, secrets=()):
    # Everything here is the service's text: shown as JSON (no terminal
    # control character reaches the screen as it is) and only when it
    # quotes no secret.
    said = json.dumps({"id": task_id, "status": status, "details": details})
    if quotes_a_secret(said, secrets):
        said = "(what the service said is not shown: it quotes a secret)"
    print("task failed:", without_secrets(said, secrets), file=sys.stderr)
    return 1


def extension_of(data):
    """What an output is, told by its first bytes (never by what the service
    calls it): the extension of an image or video, else None."""
    if data.startswith(b"\xff\xd8\xff"):
        return ".jpg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return ".png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    if data.startswith(b"GIF8"):
        return ".gif"
    if data[4:8] == b"ftyp":
        return ".mp4"
    return None


def download(sample, out_dir, task_id):
    """Saves the output. The address is signed: it takes no key, and the key must
    not go to its host. It is valid for minutes only, so this runs at once. The
    file's name is made here (from the task id's safe characters and what the
    bytes are), never taken from the service."""
    if urllib.parse.urlsplit(sample).scheme not in ("http", "https"):
        raise SystemExit("the output's address is not http or https; not fetched")
    with DOWNLOADS.open(urllib.request.Request(sample), timeout=60) as response:
        data = response.read(MAX_DOWNLOAD_BYTES + 1)
    if len(data) > MAX_DOWNLOAD_BYTES:
        raise SystemExit("the output is larger than expected; not saved")
    suffix = extension_of(data)
    if suffix is None:
        raise SystemExit("the output is not an image; not saved")
    name = re.sub(r"[^A-Za-z0-9_-]", "", task_id)[:64] or "output"
    path = os.path.join(out_dir, name + suffix)
    with open(path, "xb") as file:  # never replaces a file
        file.write(data)
    return path


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--model", default="gen-2-pro", help="the endpoint after /v1/ (default gen-2-pro)")
    parser.add_argument("--out", default=".", help="folder to save the output in")
    parser.add_argument("--listen", default="127.0.0.1", help="address to receive on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to receive on (default: any free one)")
    parser.add_argument("--public-url", help="the receiver's address as the service reaches it "
                        "(default http://LISTEN:PORT/hooks)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for the task")
    parser.add_argument("--poll-every", type=float, default=30,
                        help="seconds without a notification before polling (default 30)")
    parser.add_argument("--accept-echo", action="store_true",
                        help="take deliveries that only echo the secret (X-Webhook-Secret)")
    args = parser.parse_args()
    args.base_url = os.environ.get("GENAPI_BASE_URL")
    args.key = os.environ.get("GENAPI_API_KEY")
    args.regional_base_url = os.environ.get("GENAPI_REGIONAL_BASE_URL") or None
    args.secret = os.environ.get("GENAPI_WEBHOOK_SECRET")
    missing = [name for name, value in [("GENAPI_BASE_URL", args.base_url), ("GENAPI_API_KEY", args.key),
                                        ("GENAPI_WEBHOOK_SECRET", args.secret)] if not value]
    if missing:
        parser.error("set " + ", ".join(missing) + " in the environment")
    try:
        if len(signing_key(args.secret)) < 16:
            parser.error("GENAPI_WEBHOOK_SECRET needs at least 16 bytes of key (see docs/webhooks.md)")
    except ValueError:
        parser.error("GENAPI_WEBHOOK_SECRET: the part after whsec_ is not base64")
    return args


def main():
    args = arguments()
    deliveries = queue.Queue()
    handler = make_handler(args.secret, args.accept_echo, deliveries)
    server = http.server.ThreadingHTTPServer((args.listen, args.port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    hook = args.public_url or "http://{}:{}/hooks".format(host, port)
    print("listening", hook, flush=True)

    submission = {"prompt": args.prompt, "webhook_url": hook, "webhook_secret": args.secret}
    try:
        task = call(args.base_url.rstrip("/") + "/v1/" + args.model, key=args.key, body=submission)
    except urllib.error.HTTPError as error:
        said = refusal(error.read(65536), (args.secret, args.key))
        print("the submission was refused:", error.code, said, file=sys.stderr)
        raise SystemExit(1)
    print("submitted", task["id"], flush=True)

    result = outcome(args, task, deliveries)
    server.shutdown()
    print("saved", download(result["sample"], args.out, task["id"]), flush=True)


if __name__ == "__main__":
    main()
