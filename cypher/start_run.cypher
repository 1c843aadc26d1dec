// A :Run of a :Task (ON_TASK). Idempotent: restarting a run keeps its first record.
MERGE (t:Task {id: $task.id})
ON CREATE SET t += $task
MERGE (r:Run {id: $run.id})
ON CREATE SET r += $run
MERGE (r)-[:ON_TASK]->(t)
RETURN r.id AS id
