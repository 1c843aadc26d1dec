// A :Run of a :Task (ON_TASK). Idempotent: restarting a run keeps its first record; a task
// recorded without a family or a shape class gets the one this run knows.
MERGE (t:Task {id: $task.id})
ON CREATE SET t += $task
ON MATCH SET t.family = coalesce(t.family, $task.family),
             t.shape_class = coalesce(t.shape_class, $task.shape_class)
MERGE (r:Run {id: $run.id})
ON CREATE SET r += $run
MERGE (r)-[:ON_TASK]->(t)
RETURN r.id AS id
