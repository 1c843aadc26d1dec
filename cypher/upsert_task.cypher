MERGE (t:Task {id: $task.id})
SET t += $task
RETURN t.id AS id
