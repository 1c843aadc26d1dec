// Record counts by HTG label, and TRANSITION edges (each from Neo4j's count store).
CALL () { MATCH (n:Global) RETURN count(n) AS globals }
CALL () { MATCH (n:Local) RETURN count(n) AS locals }
CALL () { MATCH (:Global)-[e:TRANSITION]->(:Global) RETURN count(e) AS transitions }
CALL () { MATCH (n:Task) RETURN count(n) AS tasks }
CALL () { MATCH (n:Run) RETURN count(n) AS runs }
CALL () { MATCH (n:Step) RETURN count(n) AS steps }
RETURN globals, locals, transitions, tasks, runs, steps
