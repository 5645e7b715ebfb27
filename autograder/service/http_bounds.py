"""What the check service's HTTP side holds at most, whoever sends what: open connections, the requests' sizes
and times, and what JupyterHub's client keeps per request.  Each bound comes from a red-team pass
(docs/design/sandbox.md, "The check service")."""
from __future__ import annotations

import resource
from typing import Any

from jupyterhub.services.auth import HubOAuth, _ExpiringDict
from tornado.httpserver import HTTPServer

from .policy import MAX_OTHER_BYTES

# The HTTP server's bounds (`__main__` starts it): a request's size (`policy.MAX_OTHER_BYTES`; a check's handler
# raises it to `MAX_CHECK_BYTES` once it may read its body), and how long an idle connection and a slowly arriving
# body may take.
MAX_REQUEST_BYTES = MAX_OTHER_BYTES
IDLE_CONNECTION_SECONDS = 30
BODY_SECONDS = 60
# File descriptors kept for grading (the sandbox, the record, the course) whatever the connections hold.
FDS_FOR_GRADING = 512


class BoundedHTTPServer(HTTPServer):
    """The service's HTTP server: it closes a new connection at once when `most_connections` are open, so that
    connections never take the descriptors grading needs (a red-team pass held 19,341 of 20,000 with idle
    connections from one student's terminal; a check that could not open its sandbox would fail and be counted)."""

    def initialize(self, *args: Any, most_connections: int, **kwargs: Any) -> None:  # tornado's constructor
        super().initialize(*args, **kwargs)
        self.most_connections = most_connections

    def handle_stream(self, stream: Any, address: tuple) -> None:
        if len(self._connections) >= self.most_connections:
            stream.close()
            return
        super().handle_stream(stream, address)


def most_connections() -> int:
    """How many connections the service keeps open: its descriptor limit, raised to the hard limit (at most
    65,536: more than the loopback ports one client address can open), less `FDS_FOR_GRADING`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65_536 if hard == resource.RLIM_INFINITY else min(hard, 65_536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        soft = wanted
    return max(64, min(soft, 65_536) - FDS_FOR_GRADING)

# A check's body comes from the student's own Jupyter server on the hub's network (the panel's forwarder): it
# arrives within a second.  One that takes longer holds one of the `MAX_UPLOADS` slots, and is counted as a check.
CHECK_BODY_SECONDS = 10


# JupyterHub's session ids are 32 hex digits; the cookie's value is part of the key of its identity cache.
SESSION_COOKIE = "jupyterhub-session-id"
MAX_SESSION_ID_CHARS = 128
# Hub answers JupyterHub keeps (one per token and session id, five minutes; made-up tokens included).
MAX_CACHED_IDENTITIES = 10_000


class BoundedExpiringDict(_ExpiringDict):
    """JupyterHub's expiring cache, holding at most `most` entries (the oldest go first): its own bound is time
    alone, so its size followed the rate of requests with new tokens or session ids."""

    def __init__(self, max_age: float, most: int) -> None:
        super().__init__(max_age)
        self.most = most

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        while len(self.values) > self.most:
            oldest = next(iter(self.values))
            self.values.pop(oldest)
            self.timestamps.pop(oldest, None)


def bound_hub_caches(auth: HubOAuth) -> None:
    """Give `auth` (the service's JupyterHub client) caches of bounded size."""
    if not isinstance(auth.cache, BoundedExpiringDict):
        auth.cache = BoundedExpiringDict(auth.cache_max_age, MAX_CACHED_IDENTITIES)
