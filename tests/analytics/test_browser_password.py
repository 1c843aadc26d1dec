"""The README says where Neo4j Browser's password is and how to change it; the change it
gives works on the real Neo4j (tried on the session's server, then changed back)."""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

import neo4j
import pytest

from tests.conftest import PASSWORD_VAR, URI_VAR

pytestmark = pytest.mark.neo4j

README = (Path(__file__).parents[2] / "README.md").read_text()


def test_the_readme_says_where_the_password_is_and_how_to_change_it(_neo4j_session_store):
    section = README[README.index("Neo4j Browser is at") :][:900]
    assert "HTAM_NEO4J_PASSWORD" in section and "~/.config/htam-graph/htam.env" in section
    command = re.search(r"`(ALTER CURRENT USER SET PASSWORD FROM '[^']+' TO '[^']+')`", section)
    assert command and "`:use system`" in section, section
    uri, old = os.environ[URI_VAR], os.environ.get(PASSWORD_VAR, "htam-graph")
    new = secrets.token_urlsafe(12)
    change = command[1].replace("FROM 'old'", "FROM $old").replace("TO 'new'", "TO $new")
    with neo4j.GraphDatabase.driver(uri, auth=("neo4j", old)) as driver:
        driver.execute_query(change, old=old, new=new, database_="system")
    try:
        with neo4j.GraphDatabase.driver(uri, auth=("neo4j", new)) as driver:
            driver.verify_connectivity()
        with pytest.raises(neo4j.exceptions.AuthError), neo4j.GraphDatabase.driver(uri, auth=("neo4j", old)) as d:
            d.verify_connectivity()
    finally:
        with neo4j.GraphDatabase.driver(uri, auth=("neo4j", new)) as driver:
            driver.execute_query(change, old=new, new=old, database_="system")
    with neo4j.GraphDatabase.driver(uri, auth=("neo4j", old)) as driver:
        driver.verify_connectivity()
