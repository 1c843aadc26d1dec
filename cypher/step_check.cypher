// What a step refers to, checked before it writes anything.
OPTIONAL MATCH (l:Local {id: $local_id})
OPTIONAL MATCH (r:Run {id: $run_id})
RETURN [id IN $global_ids WHERE EXISTS { MATCH (:Global {id: id}) }] AS known_globals,
       l.global_id AS local_parent, r IS NOT NULL AS run_exists
