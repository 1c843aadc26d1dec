// One optimization step in one query (one round trip, committed on the server). It writes
// only when no import or reset is unfinished, every reference resolves and the step id
// is new; otherwise it returns no row (the caller diagnoses with step_check) or, for a
// replayed id, the stored step's properties (the caller compares them) and writes nothing.
// Locks: every global the step names (chosen and prefix), in $global_ids order (sorted by
// the caller), then its run; the same order in every writer, so writers wait for each
// other but never deadlock. The prefix globals are locked too although only their edges
// change: adding a relationship makes Neo4j lock the records next to it in the node's
// relationship chain (other edges of that global), and those belong to writers that
// locked that global. Everything else a step writes hangs off these: its local (under the
// chosen global), the edges into the chosen global, the run's steps (NEXT).
// $step: the step's properties (scores as JSON); $sources: the distinct prefix globals;
// $edges: per source, what the step adds at each distance (store.EdgeDelta);
// $c: the outcome counters this step moves (memory/outcome.py); $note: the step's
// reflection, first in the notes of every edge it adds to ('' adds none). A method that
// chose no global (or no local) writes the step without them and no statistics for them.
OPTIONAL MATCH (m:MemoryState {id: 'memory'})
WITH m WHERE m.pending IS NULL
MATCH (r:Run {id: $step.run_id})
WHERE r.task_id = $step.task_id
  AND ($step.global_id IS NULL OR EXISTS { MATCH (:Global {id: $step.global_id}) })
  AND ($step.local_id IS NULL OR EXISTS { MATCH (l:Local {id: $step.local_id}) WHERE l.global_id = $step.global_id })
  AND all(source IN $sources WHERE EXISTS { MATCH (:Global {id: source}) })
CALL () {
  UNWIND $global_ids AS id
  MATCH (x:Global {id: id})
  SET x._lock = true REMOVE x._lock // the write lock, in id order
}
SET r._lock = true REMOVE r._lock // the run's write lock, after the globals'
MERGE (s:Step {id: $step.id})
ON CREATE SET s.claimed = true
WITH r, s, coalesce(s.claimed, false) AS fresh
REMOVE s.claimed
WITH r, s, fresh
CALL (r, s, fresh) {
  WITH * WHERE fresh
  SET s += $step
  CREATE (r)-[:HAS_STEP]->(s)
  WITH s
  CALL (s) {
    MATCH (prev:Step {run_id: s.run_id, index: s.index - 1})
    CREATE (prev)-[:NEXT]->(s)
  }
  CALL (s) {
    MATCH (next:Step {run_id: s.run_id, index: s.index + 1})
    CREATE (s)-[:NEXT]->(next)
  }
  // Matched again under the locks: properties read before them may be stale. No row
  // (no global or local chosen) leaves the step as it is.
  CALL (s) {
    MATCH (g:Global {id: $step.global_id})
    SET g.attempts = g.attempts + 1,
        g.reward_sum = g.reward_sum + $reward,
        g.successes = g.successes + $c.successes,
        g.compile_failures = g.compile_failures + $c.compile_failures,
        g.incorrect = g.incorrect + $c.incorrect,
        g.rejected = g.rejected + $c.rejected,
        g.timeouts = g.timeouts + $c.timeouts,
        g.runtime_errors = g.runtime_errors + $c.runtime_errors,
        g.generation_failures = g.generation_failures + $c.generation_failures,
        g.trend = $decay * g.trend + (1.0 - $decay) * $reward
    CREATE (s)-[:CHOSE_GLOBAL]->(g)
  }
  CALL (s) {
    MATCH (l:Local {id: $step.local_id})
    SET l.attempts = l.attempts + 1,
        l.reward_sum = l.reward_sum + $reward,
        l.successes = l.successes + $c.successes,
        l.compile_failures = l.compile_failures + $c.compile_failures,
        l.incorrect = l.incorrect + $c.incorrect,
        l.rejected = l.rejected + $c.rejected,
        l.timeouts = l.timeouts + $c.timeouts,
        l.runtime_errors = l.runtime_errors + $c.runtime_errors,
        l.generation_failures = l.generation_failures + $c.generation_failures,
        l.positive = CASE WHEN $positive THEN ([$evidence] + l.positive)[0..$max_evidence] ELSE l.positive END,
        l.negative = CASE WHEN $positive THEN l.negative ELSE ([$evidence] + l.negative)[0..$max_evidence] END
    CREATE (s)-[:CHOSE_LOCAL]->(l)
  }
  // Missing edges are created first, then every edge is updated by a plain MATCH.
  CALL () {
    MATCH (g:Global {id: $step.global_id})
    UNWIND $edges AS ed
    MATCH (a:Global {id: ed.source})
    WHERE NOT EXISTS { (a)-[:TRANSITION]->(g) }
    CREATE (a)-[e:TRANSITION]->(g)
    SET e = $zero_edge
  }
  CALL () {
    MATCH (g:Global {id: $step.global_id})
    UNWIND $edges AS ed
    MATCH (:Global {id: ed.source})-[e:TRANSITION]->(g)
    SET e.n = e.n + ed.count,
        e.reward_sum = e.reward_sum + ed.reward,
        e.gain_sum = e.gain_sum + ed.gain,
        e.successes = e.successes + ed.counters.successes,
        e.compile_failures = e.compile_failures + ed.counters.compile_failures,
        e.incorrect = e.incorrect + ed.counters.incorrect,
        e.rejected = e.rejected + ed.counters.rejected,
        e.timeouts = e.timeouts + ed.counters.timeouts,
        e.runtime_errors = e.runtime_errors + ed.counters.runtime_errors,
        e.generation_failures = e.generation_failures + ed.counters.generation_failures,
        e.n_by_k = [i IN range(0, size(e.n_by_k) - 1) | e.n_by_k[i] + ed.dn[i]],
        e.reward_by_k = [i IN range(0, size(e.reward_by_k) - 1) | e.reward_by_k[i] + ed.dr[i]],
        e.notes = CASE WHEN $note = '' THEN e.notes ELSE ([$note] + e.notes)[0..$max_evidence] END
  }
}
RETURN fresh, CASE WHEN fresh THEN null ELSE properties(s) END AS stored
