// The evidence of operator family $family (scoring.FamilyEvidence), of its tasks of shape class
// $shape_class only when that is not null, summed on the server from
// the steps of its tasks ((:Task).family and (:Step).task_id are indexed): per chosen global,
// per chosen local, and per edge source -> target over every prefix distance (a source at two
// distances counts twice). One row per (kind, source, id); source is null but for edges.
MATCH (t:Task {family: $family})
WHERE $shape_class IS NULL OR t.shape_class = $shape_class
MATCH (s:Step {task_id: t.id})
WHERE s.global_id IS NOT NULL
WITH s, [['global', null, s.global_id]]
        + CASE WHEN s.local_id IS NULL THEN [] ELSE [['local', null, s.local_id]] END
        + [source IN coalesce(s.prefix, []) | ['edge', source, s.global_id]] AS keys
UNWIND keys AS key
RETURN key[0] AS kind, key[1] AS source, key[2] AS id, count(*) AS n, sum(s.reward) AS reward_sum
ORDER BY kind, source, id
