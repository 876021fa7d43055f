"""Group commits, lifetime totals, the database lock, host ids bound to keys, outbox ages."""

import sqlite3
import threading

import pytest
import zmq
from test_manager_parts import facts, rows, serving
from test_protocol_messages import measurement

from ghs.agent.outbox import Outbox
from ghs.client import Client
from ghs.manager.identity import HostBindings
from ghs.manager.lock import DatabaseInUseError
from ghs.manager.store import ManagerStore
from protocol import (
    Ack,
    Hello,
    KeyFileError,
    MeasurementBatch,
    decode,
    encode,
    generate_keypair,
    load_allow_list,
    write_keypair,
)


def test_batches_of_one_cycle_commit_together_and_totals_outlive_the_store(tmp_path):
    store = ManagerStore(tmp_path / "m.sqlite")
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    store.upsert_host(facts("a"))
    store.upsert_host(facts("b"))
    first = rows("a", 6)
    results = store.add_batches([("a", 50.0, first), ("ghost", 50.0, rows("ghost", 3)),
                                 ("b", 60.0, rows("b", 4)), ("a", 70.0, first[3:] +
                                                             rows("a", 2, first_seq=6))])
    assert results == [6, None, 4, 2]
    assert store.seqs("a") == list(range(8)) and store.seqs("ghost") == []
    assert store.host("a").last_seen == 70.0 and store.host("b").last_seen == 60.0
    store.add_measurements(rows("b", 4))  # all four again
    # a hello and its host's first batch and heartbeat, committed in the same transaction
    assert store.add_batches([("c", 80.0, rows("c", 1)), ("c", 90.0, [])],
                             hosts=[facts("c", seen=75.0)]) == [1, 0]
    assert store.host("c").first_seen == 75.0 and store.host("c").last_seen == 90.0
    store.close()
    again = ManagerStore(tmp_path / "m.sqlite")
    assert again.totals() == {"measurements_stored": 13, "duplicates": 3 + 4,
                              "measurements_held": 13, "hosts": 3}
    again.prune(-1.0)  # keep nothing (retention counts back from each host's latest)
    assert again.totals()["measurements_stored"] == 13  # lifetime, not what is held now
    assert again.totals()["measurements_held"] == 0


def test_a_failing_batch_commits_none_of_its_cycle(tmp_path):
    store = ManagerStore(tmp_path / "m.sqlite")
    store.upsert_host(facts("a"))
    broken = rows("a", 2, first_seq=10)
    broken[1]["rho"] = [0.5]  # no SQL type: the insert fails half way through the cycle
    with pytest.raises(sqlite3.Error):
        store.add_batches([("a", 1.0, rows("a", 3)), ("a", 1.0, broken)],
                          hosts=[facts("c", seen=0.5)])
    assert store.count() == 0 and store.totals()["measurements_stored"] == 0
    assert store.host("c") is None  # the cycle's hello went with it


def test_a_cycle_waits_for_another_threads_write_instead_of_failing(tmp_path):
    """The manager's threads share one WAL database: a cycle that reads (a hello's host row)
    before it writes must not be refused because another thread committed in between."""
    store = ManagerStore(tmp_path / "m.sqlite")
    other = sqlite3.connect(tmp_path / "m.sqlite", isolation_level=None,
                            check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO totals (name, value) VALUES ('other_thread', 1)")
    commit = threading.Timer(0.3, other.execute, ["COMMIT"])
    commit.start()
    try:
        assert store.add_batches([("c", 80.0, rows("c", 2))], hosts=[facts("c")]) == [2]
    finally:
        commit.join()
        other.close()
    assert store.seqs("c") == [0, 1]
    store.close()


def test_a_failing_prune_neither_stops_the_manager_nor_holds_back_the_ack(tmp_path):
    class LockedOutStore(ManagerStore):
        prunes = 0

        def prune(self, keep_seconds, host_id=None):
            LockedOutStore.prunes += 1
            raise sqlite3.OperationalError("database is locked")

    store = LockedOutStore(tmp_path / "m.sqlite")
    with serving(store) as (endpoint, context):
        socket = context.socket(zmq.DEALER)
        socket.linger = 0
        socket.connect(endpoint)
        try:
            def ask(message):
                socket.send(encode(message))
                assert socket.poll(10_000), f"no reply to {message.TYPE}"
                return decode(socket.recv())

            ask(Hello(request_id=1, host_id="ws1", hostname="ws1", cores=1, tau=1.0,
                      os="Linux", agent_version="0.1.0"))
            for request_id, seqs in ((2, (0, 1)), (3, (2,))):
                reply = ask(MeasurementBatch(request_id=request_id, host_id="ws1",
                                             measurements=tuple(measurement(seq)
                                                                for seq in seqs)))
                assert isinstance(reply, Ack) and reply.acked == ((seqs[0], seqs[-1]),)
            with Client(endpoint, context=context, timeout_seconds=10) as client:
                assert client.status().counters["internal_errors"] == 2
        finally:
            socket.close()
    assert LockedOutStore.prunes == 2  # tried again on the next batch, not an hour later
    assert store.seqs("ws1") == [0, 1, 2]


def _refuse_inserts(db, table, marker):
    # a write that fails half way through a transaction, as a full disk or a kill would
    db.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON {table} WHEN NEW.{marker} "
               "BEGIN SELECT RAISE(ABORT, 'refused'); END")


def test_an_outbox_record_and_its_number_commit_together_or_not_at_all(tmp_path):
    """sqlite-utils commits each write statement made outside a transaction of its own:
    a record whose seq was taken but whose row was not written would be a gap the manager
    can never fill, a measurement silently lost."""
    outbox = Outbox(tmp_path / "o.sqlite", clock=lambda: 50.0)
    _refuse_inserts(outbox.db, "outbox", "payload LIKE '%poison%'")
    with pytest.raises(sqlite3.Error):
        outbox.add_many("a", [("capacity", {"x": 1}), ("running", {"poison": 1})])
    assert outbox.count() == 0
    assert list(outbox.db.query("SELECT * FROM sequence")) == []
    assert outbox.add_many("a", [("capacity", {"x": 1}), ("running", {"y": 1})]) == [0, 0]
    outbox.close()


def test_one_manager_store_per_database_file(tmp_path):
    database = tmp_path / "m.sqlite"
    held = ManagerStore(database, exclusive=True)
    with pytest.raises(DatabaseInUseError, match="in use by another manager") as caught:
        ManagerStore(database, exclusive=True)
    assert caught.value.field == "database"
    ManagerStore(database).close()  # readers that take no lock (tools, tests) still open it
    held.close()
    ManagerStore(database, exclusive=True).close()


def test_allow_list_binds_keys_to_host_patterns(tmp_path):
    agent, lab, client = generate_keypair(), generate_keypair(), generate_keypair()
    listing = tmp_path / "allow.txt"
    listing.write_text(f"# agents and a client\n{agent.public.decode()} ws1 ws2\n"
                       f"{lab.public.decode()} lab-sim*\n{client.public.decode()}\n")
    entries = load_allow_list(listing)
    assert entries == {agent.public: ("ws1", "ws2"), lab.public: ("lab-sim*",),
                       client.public: ()}
    folder = tmp_path / "allowed"
    folder.mkdir()
    write_keypair(agent, tmp_path, "agent", hosts=("ws1", "ws2"))
    write_keypair(client, tmp_path, "client")
    for name in ("agent.key", "client.key"):
        (folder / name).write_text((tmp_path / name).read_text())
    assert load_allow_list(folder) == {agent.public: ("ws1", "ws2"), client.public: ()}
    bindings = HostBindings(entries)
    assert bindings.allows(agent.public.decode(), "ws2")
    assert not bindings.allows(agent.public.decode(), "ws3")
    assert bindings.allows(lab.public.decode(), "lab-sim07")
    assert not bindings.allows(lab.public.decode(), "lab-other")
    assert not bindings.allows(client.public.decode(), "ws1")  # listed to query only
    assert not bindings.allows(None, "ws1")  # no CurveZMQ identity at all
    with pytest.raises(KeyFileError, match="one word"):
        write_keypair(generate_keypair(), tmp_path, "bad", hosts=("two words",))


def test_outbox_knows_how_old_its_oldest_measurement_is(tmp_path):
    now = [1000.0]
    outbox = Outbox(tmp_path / "o.sqlite", clock=lambda: now[0])
    assert outbox.oldest_queued() is None
    outbox.add("a", {"x": 1})
    now[0] = 1005.0
    outbox.add("b", {"x": 2})
    assert outbox.oldest_queued() == 1000.0
    outbox.ack("a", [(0, 0)])
    assert outbox.oldest_queued() == 1005.0
    outbox.close()


def test_an_outbox_from_before_queue_ages_still_opens(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE outbox (host_id TEXT, seq INTEGER, payload TEXT, "
                           "PRIMARY KEY (host_id, seq))")
        connection.execute("INSERT INTO outbox VALUES ('a', 0, '{}')")
    outbox = Outbox(path, clock=lambda: 50.0)
    assert outbox.count() == 1 and outbox.oldest_queued() is None
    outbox.add("b", {"x": 1})
    assert outbox.oldest_queued() == 50.0
    outbox.close()
