// Why record_step wrote nothing (it returned no row): what the step refers to, and
// whether an import or reset is unfinished.
OPTIONAL MATCH (m:MemoryState {id: 'memory'})
OPTIONAL MATCH (l:Local {id: $local_id})
OPTIONAL MATCH (r:Run {id: $run_id})
RETURN [id IN $global_ids WHERE EXISTS { MATCH (:Global {id: id}) }] AS known_globals,
       l.global_id AS local_parent, r.task_id AS run_task,
       m.pending AS pending, m.pending_since AS since, m.pending_source AS source
