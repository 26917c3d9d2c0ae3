"""The fault proxy against real sockets: a threaded echo server behind it, plain sockets
and http.client in front. Timing is asserted as lower bounds only, since the machine is
shared; a fault that should not happen is asserted through data and counters."""

from __future__ import annotations

import http.client
import http.server
import json
import random
import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from chaos._toxics import BEHAVIOURS
from chaos.proxy import KINDS, ControlServer, FaultProxy, ProxyGroup, Toxic
from invariants.errors import InvalidArgument

WAIT_S = 5.0
"""Socket timeout where an answer is expected: generous, it only bounds a broken test."""
SILENCE_S = 0.3
"""How long a blackholed client waits before concluding nothing will come."""
EPSILON_S = 0.002
"""Slack for timer granularity in lower-bound timing assertions."""


class EchoServer(socketserver.ThreadingTCPServer):
    """Sends ``greeting`` on connect, then echoes; remembers the chunks each connection
    received, so a test can tell what reached the server and in how many pieces."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, greeting: bytes = b"") -> None:
        super().__init__(("127.0.0.1", 0), _Echo)
        self.greeting = greeting
        self.received: list[list[bytes]] = []
        self.lock = threading.Lock()

    def joined(self, index: int) -> bytes:
        """What connection ``index`` received so far, once its handler has started."""
        deadline = time.monotonic() + WAIT_S
        while len(self.received) <= index and time.monotonic() < deadline:
            time.sleep(0.01)
        with self.lock:
            return b"".join(self.received[index])


class _Echo(socketserver.BaseRequestHandler):
    server: EchoServer

    def handle(self) -> None:
        chunks: list[bytes] = []
        with self.server.lock:
            self.server.received.append(chunks)
        try:
            if self.server.greeting:
                self.request.sendall(self.server.greeting)
            while data := self.request.recv(65536):
                with self.server.lock:
                    chunks.append(data)
                self.request.sendall(data)
            self.request.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the proxy reset or cut the connection: that is the test's subject


def serve(server: socketserver.TCPServer) -> Iterator[tuple[str, int]]:
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server.server_address[:2]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    for _ in serve(server):
        yield server


@pytest.fixture
def greeter() -> Iterator[EchoServer]:
    server = EchoServer(greeting=b"hello\n")
    for _ in serve(server):
        yield server


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[FaultProxy]:
    with FaultProxy(echo.server_address, name="svc", rng=random.Random(7)) as started:
        yield started


def connect(proxy: FaultProxy, timeout: float = WAIT_S) -> socket.socket:
    sock = socket.create_connection(proxy.listen_address, timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def receive(sock: socket.socket, size: int) -> list[bytes]:
    """Read exactly ``size`` bytes, returning the pieces as they arrived."""
    pieces: list[bytes] = []
    while (got := sum(map(len, pieces))) < size:
        data = sock.recv(size - got)
        if not data:
            raise AssertionError(f"connection closed after {got} of {size} bytes")
        pieces.append(data)
    return pieces


def echo_once(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(payload)
    return b"".join(receive(sock, len(payload)))


def toxic_counts(proxy: FaultProxy, name: str) -> dict[str, object]:
    counts = proxy.counters()["toxics"][name]
    return {key: value for key, value in counts.items() if key not in ("attributes", "stream")}


# -- plain forwarding ----------------------------------------------------------------------


def test_bytes_pass_unchanged_both_ways_and_are_counted(proxy):
    payload = random.Random(1).randbytes(200_000)
    with connect(proxy) as sock:
        assert echo_once(sock, payload) == payload
    counters = proxy.counters()
    assert counters["bytes"] == {"upstream": 200_000, "downstream": 200_000}
    assert counters["connections"]["accepted"] == 1
    assert counters["listen"] == f"127.0.0.1:{proxy.listen_address[1]}"


def test_a_half_close_reaches_the_server_and_its_answer_still_comes_back(proxy):
    with connect(proxy) as sock:
        sock.sendall(b"last words")
        sock.shutdown(socket.SHUT_WR)
        assert b"".join(receive(sock, 10)) == b"last words"
        assert sock.recv(10) == b""


def test_an_unreachable_upstream_closes_the_client_and_is_counted():
    spare = socket.socket()
    spare.bind(("127.0.0.1", 0))
    address = spare.getsockname()
    spare.close()
    with FaultProxy(address) as proxy, connect(proxy) as sock:
        assert sock.recv(10) == b""
        assert proxy.counters()["connections"]["upstream_failed"] == 1


# -- latency -------------------------------------------------------------------------------


def test_latency_delays_each_answer_by_at_least_its_latency(proxy):
    proxy.add_toxic("lag", "latency", "downstream", latency=200, jitter=0)
    with connect(proxy) as sock:
        for _ in range(2):
            started = time.monotonic()
            assert echo_once(sock, b"ping") == b"ping"
            assert time.monotonic() - started >= 0.2 - EPSILON_S
    assert toxic_counts(proxy, "lag") == {
        "type": "latency", "toxicity": 1.0, "active": True,
        "connections": 1, "fired": 1, "bytes": 8, "chunks": 2,
    }


def test_latency_on_both_directions_adds_up(proxy):
    proxy.add_toxic("lag_up", "latency", "upstream", latency=100)
    proxy.add_toxic("lag_down", "latency", "downstream", latency=100)
    with connect(proxy) as sock:
        started = time.monotonic()
        assert echo_once(sock, b"ping") == b"ping"
        assert time.monotonic() - started >= 0.2 - EPSILON_S


def test_removing_a_latency_cuts_short_the_delay_in_progress(proxy):
    proxy.add_toxic("lag", "latency", latency=600_000)
    with connect(proxy) as sock:
        sock.sendall(b"ping")
        threading.Timer(0.1, proxy.remove_toxic, args=("lag",)).start()
        assert b"".join(receive(sock, 4)) == b"ping"  # within WAIT_S, not ten minutes
    assert proxy.counters()["toxics"]["lag"]["active"] is False


# -- timeout (blackhole) -------------------------------------------------------------------


def test_timeout_zero_blackholes_until_removed_then_closes_the_damaged_connection(proxy):
    proxy.add_toxic("hole", "timeout", "downstream", timeout=0)
    with connect(proxy, timeout=SILENCE_S) as sock:
        sock.sendall(b"anyone?")
        with pytest.raises(TimeoutError):
            sock.recv(10)
        proxy.remove_toxic("hole")
        sock.settimeout(WAIT_S)
        assert sock.recv(10) == b""
    assert toxic_counts(proxy, "hole") == {
        "type": "timeout", "toxicity": 1.0, "active": False,
        "connections": 1, "fired": 1, "bytes": 7, "closed": 1,
    }


def test_timeout_closes_the_connection_after_its_timeout(proxy):
    proxy.add_toxic("hole", "timeout", "upstream", timeout=150)
    with connect(proxy) as sock:
        started = time.monotonic()
        sock.sendall(b"anyone?")
        assert sock.recv(10) == b""
        assert time.monotonic() - started >= 0.15 - EPSILON_S
    counts = toxic_counts(proxy, "hole")
    assert (counts["fired"], counts["bytes"], counts["closed"]) == (1, 7, 1)


def test_a_blackhole_that_swallowed_nothing_lets_the_connection_resume(proxy):
    with connect(proxy) as sock:
        proxy.add_toxic("hole", "timeout", "upstream")
        proxy.remove_toxic("hole")
        assert echo_once(sock, b"still here") == b"still here"
    assert toxic_counts(proxy, "hole")["fired"] == 0


def test_an_upstream_blackhole_leaves_the_downstream_untouched(greeter):
    with FaultProxy(greeter.server_address) as proxy:
        proxy.add_toxic("hole", "timeout", "upstream")
        with connect(proxy, timeout=SILENCE_S) as sock:
            assert b"".join(receive(sock, 6)) == b"hello\n"
            sock.sendall(b"echo me")
            with pytest.raises(TimeoutError):
                sock.recv(10)
        counters = proxy.counters()
    assert greeter.joined(0) == b""
    assert counters["bytes"] == {"upstream": 0, "downstream": 6}
    assert counters["toxics"]["hole"]["bytes"] == 7


# -- reset_peer ----------------------------------------------------------------------------


def test_reset_peer_upstream_resets_the_client_before_the_server_sees_a_byte(proxy, echo):
    proxy.add_toxic("rst", "reset_peer", "upstream", timeout=0)
    with connect(proxy) as sock:
        sock.sendall(b"write x=1")
        with pytest.raises(ConnectionResetError):
            sock.recv(10)
    assert echo.joined(0) == b""
    counts = toxic_counts(proxy, "rst")
    assert (counts["fired"], counts["resets"], counts["bytes"]) == (1, 1, 9)


def test_reset_peer_downstream_resets_after_the_server_got_the_request(proxy, echo):
    proxy.add_toxic("rst", "reset_peer", "downstream", timeout=100)
    with connect(proxy) as sock:
        started = time.monotonic()
        sock.sendall(b"write x=1")
        with pytest.raises(ConnectionResetError):
            sock.recv(10)
        assert time.monotonic() - started >= 0.1 - EPSILON_S
    assert echo.joined(0) == b"write x=1"
    assert toxic_counts(proxy, "rst")["resets"] == 1


def test_http_lost_answer_the_server_handled_the_request_the_client_saw_a_reset():
    handled: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            handled.append(body.decode())
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    for address in serve(server):
        with FaultProxy(address) as proxy:
            host, port = proxy.listen_address
            client = http.client.HTTPConnection(host, port, timeout=WAIT_S)
            client.request("POST", "/write", body=b"x=1")
            assert client.getresponse().read() == b"ok"
            proxy.add_toxic("lost_ack", "reset_peer", "downstream")
            client.request("POST", "/write", body=b"x=2")
            with pytest.raises(ConnectionResetError):
                client.getresponse()
            client.close()
    assert handled == ["x=1", "x=2"]


# -- bandwidth -----------------------------------------------------------------------------


def test_bandwidth_makes_64_kb_take_at_least_size_over_rate(proxy):
    payload = random.Random(2).randbytes(65_536)
    proxy.add_toxic("thin", "bandwidth", "downstream", rate=128)
    with connect(proxy) as sock:
        started = time.monotonic()
        assert echo_once(sock, payload) == payload
        assert time.monotonic() - started >= 65_536 / 128_000 - EPSILON_S
    counts = toxic_counts(proxy, "thin")
    assert (counts["fired"], counts["bytes"]) == (1, 65_536)


# -- slicer --------------------------------------------------------------------------------


def test_slicer_delivers_in_many_pieces_yet_byte_identical(proxy):
    payload = random.Random(3).randbytes(4000)
    proxy.add_toxic("slices", "slicer", "downstream",
                    average_size=500, size_variation=100, delay=20_000)
    with connect(proxy) as sock:
        sock.sendall(payload)
        pieces = receive(sock, len(payload))
    assert b"".join(pieces) == payload
    assert len(pieces) > 1
    counts = toxic_counts(proxy, "slices")
    assert counts["fired"] == 1 and counts["slices"] >= 4000 // 600


def test_slicer_upstream_makes_the_server_receive_pieces(proxy, echo):
    payload = random.Random(4).randbytes(3000)
    proxy.add_toxic("slices", "slicer", "upstream", average_size=400, delay=20_000)
    with connect(proxy) as sock:
        assert echo_once(sock, payload) == payload
    assert echo.joined(0) == payload
    assert len(echo.received[0]) > 1


# -- limit_data ----------------------------------------------------------------------------


def test_limit_data_passes_that_many_bytes_then_closes(proxy):
    proxy.add_toxic("cut", "limit_data", "downstream", bytes=10)
    with connect(proxy) as sock:
        sock.sendall(b"0123456789abcdef")
        assert b"".join(receive(sock, 10)) == b"0123456789"
        assert sock.recv(10) == b""
    assert toxic_counts(proxy, "cut")["closed"] == 1


# -- down and up ---------------------------------------------------------------------------


def test_disable_cuts_open_connections_and_refuses_new_ones_until_enabled(proxy):
    held = connect(proxy)
    assert echo_once(held, b"before") == b"before"
    proxy.disable()
    assert held.recv(10) == b""
    held.close()
    with pytest.raises(ConnectionRefusedError):
        connect(proxy)
    proxy.disable()
    proxy.enable()
    with connect(proxy) as sock:
        assert echo_once(sock, b"after") == b"after"
    down = proxy.counters()["down"]
    assert (down["disables"], down["cut"]) == (1, 1)
    assert down["seconds"] > 0
    assert proxy.fired()["down"] == 1


def test_a_proxy_disabled_before_start_knows_its_port_and_refuses():
    with socket.create_server(("127.0.0.1", 0)) as upstream:
        proxy = FaultProxy(upstream.getsockname())
        proxy.disable()
        with proxy:
            with pytest.raises(ConnectionRefusedError):
                connect(proxy)
            assert proxy.enabled is False


def test_stop_then_start_listens_on_the_same_port_and_keeps_counters(proxy):
    with connect(proxy) as sock:
        echo_once(sock, b"one")
    address = proxy.listen_address
    proxy.stop()
    assert proxy.counters()["connections"]["accepted"] == 1
    proxy.start()
    assert proxy.listen_address == address
    with connect(proxy) as sock:
        assert echo_once(sock, b"two") == b"two"
    assert proxy.counters()["connections"]["accepted"] == 2


# -- toxicity and changes while traffic flows ----------------------------------------------


def test_toxicity_zero_never_fires(proxy):
    proxy.add_toxic("never_rst", "reset_peer", "downstream", toxicity=0)
    proxy.add_toxic("never_hole", "timeout", "upstream", toxicity=0)
    proxy.add_toxic("never_lag", "latency", "upstream", toxicity=0, latency=5_000)
    for number in range(5):
        with connect(proxy) as sock:
            assert echo_once(sock, b"n%d" % number) == b"n%d" % number
    for name in ("never_rst", "never_hole", "never_lag"):
        counts = toxic_counts(proxy, name)
        assert (counts["connections"], counts["fired"], counts["bytes"]) == (5, 0, 0)


def test_toxicity_is_rolled_once_per_connection(proxy):
    proxy.add_toxic("some_lag", "latency", "upstream", toxicity=0.5, latency=1)
    for _ in range(20):
        with connect(proxy) as sock:
            echo_once(sock, b"a")
            echo_once(sock, b"b")
    counts = toxic_counts(proxy, "some_lag")
    assert counts["connections"] == 20
    assert 0 < counts["fired"] < 20
    assert counts["chunks"] == 2 * counts["fired"]


def test_a_toxic_added_or_updated_mid_connection_applies_to_it(proxy):
    with connect(proxy, timeout=SILENCE_S) as sock:
        assert echo_once(sock, b"one") == b"one"
        proxy.add_toxic("hole", "timeout", "downstream", toxicity=0)
        assert echo_once(sock, b"two") == b"two"
        assert proxy.update_toxic("hole", toxicity=1).toxicity == 1.0
        sock.sendall(b"three")
        with pytest.raises(TimeoutError):
            sock.recv(10)
    assert [t.to_json() for t in proxy.toxics()] == [
        {"name": "hole", "type": "timeout", "stream": "downstream", "toxicity": 1.0,
         "attributes": {"timeout": 0}},
    ]


def test_update_keeps_the_toxic_and_changes_its_attributes(proxy):
    proxy.add_toxic("lag", "latency", latency=1)
    updated = proxy.update_toxic("lag", latency=150, jitter=10)
    assert dict(updated.attributes) == {"latency": 150, "jitter": 10}
    with connect(proxy) as sock:
        started = time.monotonic()
        echo_once(sock, b"x")
        assert time.monotonic() - started >= 0.14 - EPSILON_S
    assert proxy.counters()["toxics"]["lag"]["attributes"] == {"latency": 150, "jitter": 10}


def test_heal_removes_every_toxic_and_brings_the_proxy_up(proxy):
    proxy.add_toxic("hole", "timeout", "upstream")
    proxy.add_toxic("lag", "latency", latency=5)
    proxy.disable()
    proxy.heal()
    assert proxy.toxics() == () and proxy.enabled
    with connect(proxy) as sock:
        assert echo_once(sock, b"healed") == b"healed"


# -- client groups -------------------------------------------------------------------------


def test_a_partitioned_group_is_refused_while_the_other_group_works(echo):
    with ProxyGroup(echo.server_address, ["a", "b"], rng=random.Random(5)) as groups:
        assert groups["a"].listen_address != groups["b"].listen_address
        groups.partition("a")
        with pytest.raises(ConnectionRefusedError):
            connect(groups["a"])
        with connect(groups["b"]) as sock:
            assert echo_once(sock, b"b is fine") == b"b is fine"
        groups.heal()
        with connect(groups["a"]) as sock:
            assert echo_once(sock, b"a is back") == b"a is back"
        assert groups.fired() == {"a/down": 0, "b/down": 0}
        assert groups.counters()["a"]["down"]["disables"] == 1
    with pytest.raises(KeyError, match="no client group 'c'; the groups are a, b"):
        groups["c"]


# -- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Toxic("lag", "latncy"),
         "toxic 'lag': type='latncy' is not a toxic type. Did you mean 'latency'? Give one "
         "of latency, timeout, reset_peer, bandwidth, slicer, limit_data."),
        (lambda: Toxic("lag", "latency", "up"),  # type: ignore[arg-type]
         "toxic 'lag' (latency): stream='up' (type str) is not a stream. Give 'upstream' "
         "(client to server) or 'downstream' (server to client)."),
        (lambda: Toxic("lag", "latency", toxicity=1.5),
         "toxic 'lag' (latency): toxicity=1.5 (type float) is out of range. Give a "
         "probability in [0, 1]."),
        (lambda: Toxic("lag", "latency", attributes={"latancy": 5}),
         "toxic 'lag' (latency): has no attribute 'latancy'. Did you mean 'latency'? Its "
         "attributes are latency, jitter."),
        (lambda: Toxic("lag", "latency", attributes={"jitter": -1}),
         "toxic 'lag' (latency): jitter=-1 (type int) is out of range. Give milliseconds, "
         "a whole number in [0, 3600000]."),
        (lambda: Toxic("thin", "bandwidth"),
         "toxic 'thin' (bandwidth): needs rate. Delivers at most rate KB (1000 bytes) per "
         "second."),
        (lambda: Toxic("thin", "bandwidth", attributes={"rate": 0}),
         "toxic 'thin' (bandwidth): rate=0 (type int) is out of range. Give kilobytes "
         "(1000 bytes) per second, a whole number >= 1."),
        (lambda: Toxic("cut", "slicer", attributes={"average_size": 10, "size_variation": 10}),
         "toxic 'cut' (slicer): size_variation=10 is not below average_size=10. Give a "
         "size_variation smaller than average_size, so no slice is empty."),
        (lambda: Toxic("a/b", "latency"),
         "toxic name='a/b' (type str) is not a usable name. Give 1 to 64 letters, digits, "
         "'_', '-' or '.'."),
        (lambda: FaultProxy("localhost"),
         "upstream='localhost' (type str) is not an address. Give 'host:port' or a "
         "(host, port) tuple."),
        (lambda: FaultProxy(("127.0.0.1", 70000)),
         "upstream: port=70000 (type int) is not a port. Give a whole number in [1, 65535]."),
    ],
)
def test_bad_definitions_are_refused_naming_the_field(build, message):
    with pytest.raises(InvalidArgument) as refused:
        build()
    assert str(refused.value) == message


def test_bad_changes_are_refused_and_change_nothing(proxy):
    proxy.add_toxic("lag", "latency", latency=5)
    with pytest.raises(InvalidArgument) as duplicate:
        proxy.add_toxic("lag", "latency")
    assert str(duplicate.value) == (
        "proxy 'svc' already has a toxic named 'lag'. Remove it first, or change it with "
        "update_toxic()."
    )
    with pytest.raises(InvalidArgument) as unknown:
        proxy.remove_toxic("lga")
    assert str(unknown.value) == "proxy 'svc' has no toxic named 'lga'. Its toxics: lag."
    with pytest.raises(InvalidArgument, match=r"jitter=-3 \(type int\) is out of range"):
        proxy.update_toxic("lag", jitter=-3)
    proxy.remove_toxic("lag")
    with pytest.raises(InvalidArgument) as reused:
        proxy.add_toxic("lag", "timeout")
    assert str(reused.value) == (
        "toxic 'lag' was a latency toxic earlier on this proxy and its counts are kept under "
        "that name. Give the timeout toxic another name."
    )
    assert proxy.toxics() == ()
    assert proxy.counters()["toxics"]["lag"]["attributes"] == {"latency": 5, "jitter": 0}


def test_a_toxic_given_only_its_required_attributes_carries_all_of_them():
    required = {"bandwidth": {"rate": 1}, "slicer": {"average_size": 1}, "limit_data": {"bytes": 0}}
    for type_name, kind in KINDS.items():
        toxic = Toxic("t", type_name, attributes=required.get(type_name, {}))
        assert set(toxic.attributes) == set(kind.params)
        assert (toxic.stream, toxic.toxicity) == ("downstream", 1.0)


def test_a_toxic_built_beforehand_is_added_as_is(proxy):
    toxic = Toxic("hole", "timeout", "upstream", 0.0, {"timeout": 50})
    assert proxy.add(toxic) is toxic
    assert proxy.toxics() == (toxic,)
    with pytest.raises(InvalidArgument) as refused:
        proxy.add({"name": "hole"})
    assert str(refused.value) == (
        "toxic={'name': 'hole'} (type dict) is not a Toxic. Build one with Toxic(name, type, "
        "stream, toxicity, attributes)."
    )


# -- the JSON control API ------------------------------------------------------------------


def call(api: ControlServer, method: str, path: str, body: object = None) -> tuple[int, object]:
    client = http.client.HTTPConnection(*api.address, timeout=WAIT_S)
    try:
        payload = None if body is None else json.dumps(body).encode()
        client.request(method, path, body=payload)
        answer = client.getresponse()
        raw = answer.read()
        return answer.status, json.loads(raw) if raw else None
    finally:
        client.close()


def test_the_control_api_adds_updates_and_removes_toxics_like_toxiproxy(proxy):
    with ControlServer({"svc": proxy}) as api:
        status, toxic = call(api, "POST", "/proxies/svc/toxics",
                             {"type": "latency", "attributes": {"latency": 150}})
        assert (status, toxic) == (200, {
            "name": "latency_downstream", "type": "latency", "stream": "downstream",
            "toxicity": 1.0, "attributes": {"latency": 150, "jitter": 0}})
        with connect(proxy) as sock:
            started = time.monotonic()
            echo_once(sock, b"x")
            assert time.monotonic() - started >= 0.15 - EPSILON_S
        status, toxic = call(api, "PATCH", "/proxies/svc/toxics/latency_downstream",
                             {"toxicity": 0.5})
        assert (status, toxic["toxicity"]) == (200, 0.5)
        assert call(api, "GET", "/proxies/svc/toxics")[1] == [toxic]
        assert call(api, "DELETE", "/proxies/svc/toxics/latency_downstream") == (204, None)
        assert call(api, "GET", "/proxies")[1] == {"svc": {
            "name": "svc", "listen": f"127.0.0.1:{proxy.listen_address[1]}",
            "upstream": proxy.counters()["upstream"], "enabled": True, "toxics": []}}
        assert call(api, "GET", "/counters")[1]["svc"]["toxics"]["latency_downstream"]["fired"] == 1


def test_the_control_api_takes_a_proxy_down_and_resets_everything(proxy):
    with ControlServer({"svc": proxy}) as api:
        assert call(api, "POST", "/proxies/svc", {"enabled": False})[1]["enabled"] is False
        with pytest.raises(ConnectionRefusedError):
            connect(proxy)
        call(api, "POST", "/proxies/svc/toxics", {"name": "hole", "type": "timeout"})
        assert call(api, "POST", "/reset") == (204, None)
        assert proxy.enabled and proxy.toxics() == ()


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "error"),
    [
        ("POST", "/proxies/svc/toxics", {"type": "latency", "attributes": {"latency": -1}}, 400,
         "toxic 'latency_downstream' (latency): latency=-1 (type int) is out of range. Give "
         "milliseconds, a whole number in [0, 3600000]."),
        ("POST", "/proxies/svc/toxics", {"type": 3}, 400,
         "type=3 is not a toxic type. Give one of latency, timeout, reset_peer, bandwidth, "
         "slicer, limit_data."),
        ("POST", "/proxies/svc/toxics", {"name": "lag", "type": "latency"}, 409,
         "toxic 'lag' already exists on proxy 'svc'"),
        ("GET", "/proxies/nope", None, 404, "proxy 'nope' not found; proxies: svc"),
        ("DELETE", "/proxies/svc/toxics/nope", None, 404, "toxic 'nope' not found on proxy 'svc'"),
        ("POST", "/proxies/svc", {"enabled": "no"}, 400,
         "enabled='no' is not a boolean. Send true or false."),
    ],
)
def test_the_control_api_refuses_with_the_reason(proxy, method, path, body, status, error):
    proxy.add_toxic("lag", "latency")
    with ControlServer({"svc": proxy}) as api:
        assert call(api, method, path, body) == (status, {"error": error, "status": status})
    assert [toxic.name for toxic in proxy.toxics()] == ["lag"] and proxy.enabled


def test_every_declared_toxic_type_has_exactly_one_behaviour_and_every_behaviour_a_type():
    assert list(BEHAVIOURS) == list(KINDS)
    assert len(set(BEHAVIOURS.values())) == len(BEHAVIOURS)
