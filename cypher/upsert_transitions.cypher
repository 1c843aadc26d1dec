// Seeding: create or update TRANSITION edges between globals with the bank's static
// knowledge (when, rationale, risks, prior, prior_n); their evidence is kept.
// $zero_edge: a new edge's properties (no evidence, no prior).
UNWIND $rows AS row
MATCH (a:Global {id: row.source}), (b:Global {id: row.target})
MERGE (a)-[e:TRANSITION]->(b)
ON CREATE SET e += $zero_edge
SET e += row.props
RETURN count(e) AS n
