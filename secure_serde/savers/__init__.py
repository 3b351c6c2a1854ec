"""Savers that keep every state value behind the serde.

`secure_serde.savers.postgres` holds the PostgreSQL entry points (it needs
the ``postgres`` extra), `secure_serde.savers.sqlite` the SQLite ones. Each
is a thin constructor: it builds the stock langgraph saver (its schema, SQL
and rows) on the connection given and wraps it in `secure_serde.SealedSaver`,
so every value, pending write and metadata key reaches the database sealed
for its location, and the config reaches it reduced to the ids. The names
below need no database driver until they are called:

* `adopt` copies the threads of an older store (one secure_serde 0.3's
  savers wrote, or a stock saver with or without secure_serde's serde) into
  a `SealedSaver`, after a dry run that lists every row it cannot vouch for
  (docs/upgrading.md);
* `V03Reader` (also `secure_serde.stores.V03Reader`): ``adopt``'s source for
  a store 0.3's savers wrote.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from secure_serde.savers._adopt import AdoptReport, Unvouched, adopt
    from secure_serde.stores import V03Reader
else:
    from secure_serde._lazy import lazy_attributes

    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "AdoptReport": "secure_serde.savers._adopt",
            "Unvouched": "secure_serde.savers._adopt",
            "V03Reader": "secure_serde.stores",
            "adopt": "secure_serde.savers._adopt",
        },
    )

__all__ = [
    "AdoptReport",
    "Unvouched",
    "V03Reader",
    "adopt",
]
