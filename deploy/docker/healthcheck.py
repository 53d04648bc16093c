#!/usr/bin/env python3
"""Container health check: exit 0 when an HTTP endpoint answers 2xx, else 1.

Usage: rubricate-healthcheck [URL]

The default URL is http://127.0.0.1:$RUBRICATE_PORT/healthz (RUBRICATE_PORT: 8000 unless
set). Standard library only: the images carry neither curl nor wget. Proxy variables are
ignored, so a container's HTTP(S)_PROXY cannot send the probe elsewhere.
"""

import os
import sys
import urllib.error
import urllib.request


def main(argv: list[str]) -> int:
    port = os.environ.get("RUBRICATE_PORT", "8000")
    url = argv[1] if len(argv) > 1 else f"http://127.0.0.1:{port}/healthz"
    timeout = float(os.environ.get("RUBRICATE_HEALTHCHECK_TIMEOUT_S", "4"))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        print(f"unhealthy: {url} answered {exc.code}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"unhealthy: {url}: {exc}", file=sys.stderr)
        return 1
    if not 200 <= status < 300:
        print(f"unhealthy: {url} answered {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
