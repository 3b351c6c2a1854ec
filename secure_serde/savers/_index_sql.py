"""A `FilterPlan` as SQL, for each saver family, on top of the stock WHERE clause.

The stock savers' own metadata predicate handles the plaintext part of a
filter unchanged; blind-index tokens add one more predicate: an OR with
one branch per index key (a row's tokens were all written under one key).

* PostgreSQL: each branch is ``metadata @> %s``, JSONB containment as the
  stock filter uses, so a GIN index on ``metadata`` serves it.
* SQLite: each branch is the stock ``json_extract(CAST(metadata AS TEXT),
  '$.<path>') = ?`` match, one per filtered key (``IS NULL OR = ?`` for a
  ``None`` filter value, as the stock ``IS ?`` matches a missing key).

No database driver is imported here: the PostgreSQL parameters are plain
dicts for the caller to wrap (``psycopg.types.json.Jsonb``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from langchain_core.runnables import RunnableConfig

from secure_serde.savers._blind_index import INDEX_METADATA_KEY, FilterPlan, check_index_name

__all__ = ["postgres_index_predicate", "sqlite_search_where", "with_predicate"]

_SQLITE_EXTRACT: Final = "json_extract(CAST(metadata AS TEXT), '$.{path}') = ?"


def with_predicate(
    where: str, params: Sequence[Any], predicate: str, extra: Sequence[Any]
) -> tuple[str, list[Any]]:
    """A stock ``WHERE ...`` clause (or ``""``) with ``predicate`` ANDed in."""
    if not predicate:
        return where, list(params)
    clause = f"{where} AND {predicate}" if where else f"WHERE {predicate}"
    return clause, [*params, *extra]


def postgres_index_predicate(plan: FilterPlan) -> tuple[str, list[dict[str, Any]]]:
    """``(metadata @> %s OR ...)`` and its JSON documents; ``("", [])`` without index terms.

    Each document carries the plaintext terms too, so that with index terms
    the whole filter is one containment per index key, as the stock filter
    is one containment (pass the stock predicate no filter then).
    """
    if not plan.alternatives:
        return "", []
    predicate = "(" + " OR ".join("metadata @> %s" for _ in plan.alternatives) + ")"
    return predicate, [{**plan.plain, INDEX_METADATA_KEY: t} for t in plan.alternatives]


def sqlite_search_where(
    config: RunnableConfig | None,
    plan: FilterPlan,
    before: RunnableConfig | None = None,
) -> tuple[str, list[Any]]:
    """The stock SQLite saver's ``search_where``, with the plan's index tokens ANDed in.

    A sealed SQLite saver's ``list``/``alist`` builds its query with this
    instead of ``langgraph.checkpoint.sqlite.utils.search_where(config,
    filter, before)``, after ``plan = sealer.plan_filter(filter)``.
    """
    # Imported here: the SQLite saver is an optional dependency.
    from langgraph.checkpoint.sqlite.utils import search_where

    where, params = search_where(config, plan.plain or None, before)
    if not plan.alternatives:
        return where, list(params)
    branches = []
    values: list[Any] = []
    for tokens in plan.alternatives:
        terms = []
        for name, token in tokens.items():
            check_index_name(name)  # the path is spliced into SQL, as the stock filter does
            term = _SQLITE_EXTRACT.format(path=f"{INDEX_METADATA_KEY}.{name}")
            if name in plan.nullable:
                # The stock `IS ?` with None also matches rows without the key.
                term = f"({term.removesuffix(' = ?')} IS NULL OR {term})"
            terms.append(term)
            values.append(token)
        branches.append("(" + " AND ".join(terms) + ")")
    return with_predicate(where, params, "(" + " OR ".join(branches) + ")", values)
