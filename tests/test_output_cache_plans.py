"""The lookup of LLM outputs paid for runs on plans made for the tables as they are."""

from __future__ import annotations

from kb.store import Store


def test_the_llm_output_lookup_never_keeps_a_plan_made_for_empty_tables(store: Store) -> None:
    """A first index runs the lookup of LLM outputs by key at every note, from when the
    tables are empty: a plan kept from then scans every row of `chunks` ever after."""
    # psycopg prepares a statement at its fifth run; PostgreSQL may then keep one plan for
    # every run after five runs of it prepared.
    for _ in range(20):
        store.caches.known_outputs(["a key"], "a model")
    with store.pool.connection() as conn:
        plans = conn.execute(
            "SELECT statement, generic_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%%summary_key%%'"
        ).fetchall()
    assert all(p["generic_plans"] == 0 for p in plans), plans
