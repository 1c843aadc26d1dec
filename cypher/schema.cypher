// HTG schema: uniqueness constraints (each also backs an index). Idempotent.
// Run one statement at a time (concurrent schema creation can race).
CREATE CONSTRAINT global_id IF NOT EXISTS FOR (g:Global) REQUIRE g.id IS UNIQUE;
CREATE CONSTRAINT local_id IF NOT EXISTS FOR (l:Local) REQUIRE l.id IS UNIQUE;
CREATE CONSTRAINT task_id IF NOT EXISTS FOR (t:Task) REQUIRE t.id IS UNIQUE;
CREATE CONSTRAINT run_id IF NOT EXISTS FOR (r:Run) REQUIRE r.id IS UNIQUE;
CREATE CONSTRAINT step_id IF NOT EXISTS FOR (s:Step) REQUIRE s.id IS UNIQUE;
CREATE CONSTRAINT memory_state_id IF NOT EXISTS FOR (m:MemoryState) REQUIRE m.id IS UNIQUE;
CREATE INDEX step_run_index IF NOT EXISTS FOR (s:Step) ON (s.run_id, s.index);
CREATE INDEX task_family IF NOT EXISTS FOR (t:Task) ON (t.family);
CREATE INDEX step_task IF NOT EXISTS FOR (s:Step) ON (s.task_id);
