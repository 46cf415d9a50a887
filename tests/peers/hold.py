"""Another local user's connections to loopback HTTP ports, for
tests/it/http_other_uid.rs (run as that user, through runuser).

    hold.py N PORT...

Opens N connections to each PORT on 127.0.0.1 and sends half a request
head on each (no blank line: a server that reads it waits for the rest),
then prints {"held": ..., "failed": ...} and keeps them open until a line
arrives on stdin (or stdin ends). Then it watches every connection for up
to 30 s and prints how they ended: {"closed": ..., "answered": ...,
"open": ...} ("closed": the server closed or reset it without sending a
byte; "answered": the server sent something).
"""

import json
import select
import socket
import sys
import time


def main():
    n = int(sys.argv[1])
    ports = [int(p) for p in sys.argv[2:]]
    socks = []
    failed = 0
    for port in ports:
        for _ in range(n):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Slow: " % port)
                socks.append(s)
            except OSError:
                # Refused or reset before the half head was out: the
                # server did not keep it.
                failed += 1
    print(json.dumps({"held": len(socks), "failed": failed}), flush=True)
    sys.stdin.readline()

    closed = answered = 0
    poller = select.poll()
    by_fd = {}
    for s in socks:
        poller.register(s, select.POLLIN | select.POLLHUP | select.POLLERR)
        by_fd[s.fileno()] = s
    deadline = time.monotonic() + 30
    while by_fd and time.monotonic() < deadline:
        for fd, _ in poller.poll(1000):
            s = by_fd.pop(fd, None)
            if s is None:
                continue
            poller.unregister(fd)
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data:
                answered += 1
            else:
                closed += 1
            s.close()
    print(json.dumps({"closed": closed, "answered": answered, "open": len(by_fd)}), flush=True)


if __name__ == "__main__":
    main()
