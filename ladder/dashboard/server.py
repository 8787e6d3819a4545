"""The dashboard's HTTP server: the static page, plotly.js, and a read-only JSON/CSV API.

Standard library only (``http.server.ThreadingHTTPServer``, HTTP/1.1 keep-alive). Routes:

    GET /                                          the page (index.html)
    GET /static/<app.js|moe.js|compare.js|...>     its assets; plotly.js comes from the installed
                                                   ``plotly`` package (no CDN, works offline)
    GET /api/ladders                               the ladders under the root
    GET /api/ladders/<ladder>/<view>               view: overview rungs fit hero moe compare tables
    GET /api/ladders/<ladder>/tables/<table>.csv   any table as CSV

Nothing is served from a path named in a request: requests name a ladder, a view or a table, each
checked against what exists, so ``..``, encoded ``%2e%2e``, backslashes and absolute paths get 400
or 404 and never a file. Only GET and HEAD. Binds 127.0.0.1 unless told otherwise; on a loopback
address, requests whose Host header is not a loopback name are refused (DNS rebinding).
API answers are cached and rebuilt only when a file they read changed (a stat fingerprint, checked
at most every ``cache_s``), so many open tabs cost one read of the files; ETags let polls get 304.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ladder.dashboard.data import Root, safe_name, to_csv

STATIC_DIR = Path(__file__).with_name("static")
VIEWS = ("overview", "rungs", "fit", "hero", "moe", "compare", "tables")
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
       "connect-src 'self'; font-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_BAD_PATH = re.compile(r"(\.\.|\\|\x00|//)")
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}


def plotly_js_path() -> Path:
    """plotly.min.js bundled with the installed ``plotly`` package (a copy in static/ wins)."""
    local = STATIC_DIR / "plotly.min.js"
    if local.is_file():
        return local
    return Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))


class _Asset:
    __slots__ = ("body", "_gz", "etag", "ctype")

    def __init__(self, body: bytes, ctype: str):
        self.body = body
        self._gz = None
        self.etag = '"' + hashlib.sha1(body).hexdigest()[:20] + '"'
        self.ctype = ctype

    @property
    def gz(self) -> bytes | None:
        """The gzipped body (made on first use; None for small bodies)."""
        if self._gz is None and len(self.body) > 1024:
            self._gz = gzip.compress(self.body, 5)
        return self._gz


class Dashboard:
    """The application: routes a request path to (status, content type, bytes)."""

    def __init__(self, root: str | Path, cache_s: float = 1.0):
        self.root = Root(root)
        self.cache_s = cache_s
        self._assets: dict[str, _Asset] = {}
        self._assets_lock = threading.Lock()
        self._cache: dict[str, tuple[float, tuple, _Asset]] = {}
        self._cache_lock = threading.Lock()

    def asset(self, name: str) -> _Asset | None:
        with self._assets_lock:
            if name in self._assets:
                return self._assets[name]
            if name == "plotly.min.js":
                path = plotly_js_path()
            elif name in ("index.html", "app.js", "moe.js", "compare.js", "app.css", "favicon.svg"):
                path = STATIC_DIR / name
            else:
                return None
            try:
                body = path.read_bytes()
            except OSError:
                return None
            a = self._assets[name] = _Asset(body, _TYPES.get(path.suffix, "application/octet-stream"))
            return a

    def route(self, raw_path: str) -> tuple[int, _Asset | str]:
        """(HTTP status, asset or error message) for a request target."""
        parts = urlsplit(raw_path)
        path = parts.path
        decoded = unquote(path)
        if _BAD_PATH.search(path) or _BAD_PATH.search(decoded) or "%" in decoded or not path.startswith("/"):
            return 400, "refused: the path may not contain '..', '//', backslashes or encoded separators"
        if decoded in ("/", "/index.html"):
            return self._static("index.html")
        segs = decoded.strip("/").split("/")
        if segs[0] == "static" and len(segs) == 2:
            return self._static(segs[1])
        if segs[0] == "favicon.ico":
            return self._static("favicon.svg")
        if segs[0] != "api":
            return 404, f"not found: {decoded}"
        return self._api(segs[1:], decoded)

    def _static(self, name: str):
        a = self.asset(name)
        return (200, a) if a is not None else (404, f"not found: /static/{name}")

    def _api(self, segs: list[str], key: str):
        """Answers are rebuilt only when a file they read changed (stat fingerprint); within
        ``cache_s`` of the last check they are served without even that."""
        now = time.monotonic()
        with self._cache_lock:
            hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self.cache_s:
            return 200, hit[2]
        ladder = segs[1] if len(segs) >= 2 and segs[0] == "ladders" and safe_name(segs[1]) else None
        sig = self.root.signature(ladder)
        if hit is not None and hit[1] == sig:
            with self._cache_lock:
                self._cache[key] = (now, sig, hit[2])
            return 200, hit[2]
        result = self._api_uncached(segs)
        if isinstance(result, tuple):
            return result
        with self._cache_lock:
            if len(self._cache) > 512:
                self._cache.clear()
            self._cache[key] = (now, sig, result)
        return 200, result

    def _api_uncached(self, segs: list[str]):
        root = self.root
        if segs == ["ladders"]:
            return _json(root.summary())
        if len(segs) < 3 or segs[0] != "ladders":
            return 404, "not found: API paths are /api/ladders[/<ladder>/<view>]"
        ladder = segs[1]
        if not safe_name(ladder) or root.ladder_dir(ladder) is None or ladder not in root.ladders():
            return 404, f"no ladder named {ladder!r} under the root"
        if len(segs) == 3 and segs[2] in VIEWS:
            view = segs[2]
            if view == "tables":
                return _json({"ladder": ladder, "tables": root.tables(ladder)})
            return _json(getattr(root, view)(ladder))
        if len(segs) == 4 and segs[2] == "tables" and segs[3].endswith(".csv"):
            name = segs[3][:-4]
            rows = root.table(ladder, name) if safe_name(name) else None
            if rows is None:
                return 404, f"no table named {name!r} in ladder {ladder!r}"
            return _Asset(to_csv(rows).encode(), "text/csv; charset=utf-8")
        return 404, "not found: views are " + ", ".join(VIEWS)


def _host_name(host: str) -> str:
    """The name part of a Host header: 'localhost:8765' -> 'localhost', '[::1]:80' -> '[::1]'."""
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _json(obj) -> _Asset:
    return _Asset(json.dumps(obj, separators=(",", ":"), allow_nan=False, default=str).encode(),
                  "application/json")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall
    server_version = "ladder-dashboard"
    sys_version = ""
    app: Dashboard
    allowed_hosts: set[str] | None
    quiet: bool

    def do_GET(self):  # noqa: N802
        self._serve(head=False)

    def do_HEAD(self):  # noqa: N802
        self._serve(head=True)

    def _refuse_method(self):
        self._send_text(405, "read-only: only GET and HEAD", extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method  # noqa: N815

    def _serve(self, head: bool):
        try:
            if self.allowed_hosts is not None:
                if _host_name(self.headers.get("Host") or "") not in self.allowed_hosts:
                    self._send_text(403, "refused: unexpected Host header")
                    return
            status, payload = self.app.route(self.path)
            if isinstance(payload, str):
                self._send_text(status, payload, head=head)
                return
            self._send_asset(payload, head)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception:  # never let one request take the server down
            traceback.print_exc(file=sys.stderr)
            try:
                self._send_text(500, "internal error (see the server's log)")
            except OSError:
                pass

    def _common_headers(self):
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Referrer-Policy", "no-referrer")

    def _send_asset(self, a: _Asset, head: bool):
        if self.headers.get("If-None-Match") == a.etag:
            self.send_response(304)
            self.send_header("ETag", a.etag)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        use_gz = a.gz is not None and "gzip" in (self.headers.get("Accept-Encoding") or "")
        body = a.gz if use_gz else a.body
        self.send_response(200)
        self.send_header("Content-Type", a.ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", a.etag)
        self.send_header("Vary", "Accept-Encoding")
        if use_gz:
            self.send_header("Content-Encoding", "gzip")
        if self.path.startswith("/static/plotly"):
            self.send_header("Cache-Control", "max-age=86400")
        else:
            self.send_header("Cache-Control", "no-cache")
        if a.ctype.startswith("text/csv"):
            name = self.path.rsplit("/", 1)[-1].split("?")[0]
            self.send_header("Content-Disposition", f'attachment; filename="{name}"')
        self._common_headers()
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _send_text(self, status: int, text: str, head: bool = False, extra: dict | None = None):
        body = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self._common_headers()
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002
        if not self.quiet:
            sys.stderr.write(f"{self.address_string()} - {format % args}\n")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class DashboardServer:
    """Serve a ladder root: ``with DashboardServer(root, port=0) as s: urlopen(s.url)``."""

    def __init__(self, root: str | Path, host: str = "127.0.0.1", port: int = 8765, quiet: bool = True,
                 cache_s: float = 1.0):
        self.app = Dashboard(root, cache_s=cache_s)
        allowed = None
        if host in LOOPBACK:
            allowed = set(LOOPBACK) | {host}
        handler = type("Handler", (_Handler,), {"app": self.app, "allowed_hosts": allowed, "quiet": quiet})
        if ":" in host:
            _Server.address_family = __import__("socket").AF_INET6
        self.httpd = _Server((host, port), handler)
        self.host = host
        self.port = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> DashboardServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="ladder-dashboard", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        try:
            self.httpd.serve_forever()
        finally:
            self.httpd.server_close()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> DashboardServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
