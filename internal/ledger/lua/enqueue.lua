-- enqueue.lua: create pending jobs, each unless its operation id is already
-- known (one job for Enqueue, a batch for EnqueueMany).
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 mode: '' (enqueue) or 'resubmit' (a client re-submits enqueues it recorded,
--   after a detected rewind: a job whose record or operation id exists is left as it
--   is and reported deduplicated, even without an operation id)
-- ARGV from 3, 10 values per job:
--   job id, kind, operation id ('' = the job id: no operation key is written; with a
--   job id op_named(operation id), the id names it: no operation key nor 'op' field),
--   resource ('' = the job), payload (JSON),
--   args for display (JSON with sensitive fields redacted; '' = the payload, stored as '='),
--   max retries, timeout ms (0 = pool default), delay ms (the due time is Redis TIME plus the
--   delay, so no client clock is involved; negative for a RunAt already past),
--   headers (a JSON object of strings, returned by every claim; '' = none, nothing written)
-- Reply: {first, seq, seq raised (1/0), enqueued, history, then 2 values per job:
--   created (1), deduplicated (0) or left out, nothing written, its job key
--   holding another type than a hash (4), job id}
--   first = 1 when the queue's counters were empty before this call: the caller
--   (re-)registers the queue. seq, seq raised, enqueued and history: the write
--   sequence (see seq_bump in prelude.lua). A deduplicated job returns the existing job's id
--   and writes nothing.
local created, due = 0, {}
local reply = {0, 0, 0, 0, ''}
local resubmit = ARGV[2] == 'resubmit'
seq_bump()
for i = 3, #ARGV, 10 do
  local id, op = ARGV[i], ARGV[i + 2]
  local existing = false
  if op ~= '' then existing = op_holder(op) end
  if resubmit and not existing and redis.call('EXISTS', jobkey(id)) == 1 then existing = id end
  local srun_at = nil
  if existing then
    if not resubmit then
      tallied('deduplicated_enqueue')
      event({type = 'deduplicated', stage = 'enqueue', job = existing, op = op})
    end
    reply[#reply + 1], reply[#reply + 2] = 0, existing
  else
    srun_at = select(2, write_new_job(i)) -- the job's first write
    if not srun_at then reply[#reply + 1], reply[#reply + 2] = 4, id end
  end
  if srun_at then
    if op ~= '' and id ~= op_named(op) then redis.call('SET', opkey(op), id) end
    if resubmit then
      tallied('resubmitted')
      event({type = 'resubmitted', job = id, op = op})
    end
    due[#due + 1], due[#due + 2] = srun_at, id
    created = created + 1
    reply[#reply + 1], reply[#reply + 2] = 1, id
  end
end
return enqueue_reply(reply, created, due)
