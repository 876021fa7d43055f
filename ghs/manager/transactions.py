"""The manager's write transactions.

sqlite-utils (4 and later) commits every write statement made outside a transaction at
once, so ``with connection:`` groups nothing. And the manager's threads each have their own
connection to one WAL database: a transaction that reads before it writes, begun DEFERRED
(as ``Database.atomic`` begins it), fails with SQLITE_BUSY, without waiting, when another
thread commits between its read and its first write. A write transaction here takes the
write lock when it begins, so it waits its turn (up to the connection's busy timeout) and
then cannot be refused half way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import sqlite_utils


@contextlib.contextmanager
def write_transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """Everything written inside commits together, or (on any exception) none of it.

    Inside another write transaction it simply joins that one.
    """
    connection = db.conn
    if connection.in_transaction:
        yield db
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield db
        connection.execute("COMMIT")
    except BaseException:
        # a failed COMMIT leaves the transaction open: every later write would join it
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
