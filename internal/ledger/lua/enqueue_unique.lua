-- enqueue_unique.lua: create pending jobs that are unique (jobs.Unique), under
-- flow control (jobs.Limiter, jobs.RateLimiter: see flow.lua) or grouped
-- (jobs.Group: see group.lua). A unique job
-- is a duplicate while another job holding the same unique key is in one of
-- that job's unique states; a duplicate returns the holder and writes
-- nothing. A job due now whose concurrency limit is full, or has jobs
-- waiting, is parked at once instead of entering the due index (a grouped
-- job only when it would lead its group: see group_enqueue). Jobs
-- without these options go through enqueue.lua, which this script leaves
-- untouched: both write a job with the prelude's write_new_job.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua); KEYS 3 the queue's
--   unique index ns:{q}:unique (hash: unique key -> job id holding it).
-- ARGV 2 mode: '' (enqueue) or 'resubmit' (as enqueue.lua's: a job whose record
--   or operation id exists is left as it is; a unique job whose key another job
--   holds is left out, reported deduplicated to that job; else it is created
--   holding its key, under its limit, rate and group as first enqueued)
-- ARGV from 3, 20 values per job: the 10 of enqueue.lua (job id, kind,
--   operation id, resource, payload, args for display, max retries, timeout ms,
--   delay ms, headers), then
--   unique digest (hex, of kind and the chosen args),
--   period ms (0: none; else the key is the digest in the period of the namespace's time
--     the enqueue falls in: '<digest>:<period>:<floor((now - age) / period)>'),
--   unique states (comma separated: the holder keeps the key while in one),
--   age ms (a re-submission's time since its first enqueue, whose period it keeps; else 0)
--   (unique digest '' = not unique: the four are ignored)
--   limit key ('' = none), limit max, rate key ('' = none), rate max, rate period ms,
--   group ('' = none)
-- Reply: as enqueue.lua's: {first, seq, seq raised, enqueued, history, then 2 values per
--   job: created (1), created and parked on its concurrency limit (2),
--   deduplicated by operation id (0) or by unique key (3), left out, nothing
--   written, its job key holding another type than a hash or its limit or
--   group key another type than a sorted set (4), job id (the
--   holder's when deduplicated; for 3, {holder's id, its op field or ''})}
local uniqk = KEYS[3]
local created, due = 0, {}
local reply = {0, 0, 0, 0, ''}
local resubmit = ARGV[2] == 'resubmit'
seq_bump()

-- holds reports whether job hid holds unique key ukey: it exists, is in
-- one of its unique states, and ukey is its key (a job id named by an
-- operation id is used again once its job expired: the new job may hold
-- another key, and the index's entry of the old one is then free). A job
-- key holding no hash holds nothing (jobread): an error here would leave
-- the batch's jobs written before it in no index.
local function holds(hid, ukey)
  local h = jobread(jobkey(hid), 'state', 'ustates', 'ukey')
  if not h[1] or not h[2] or h[3] ~= ukey then return false end
  for s in string.gmatch(h[2], '[^,]+') do
    if s == h[1] then return true end
  end
  return false
end

for i = 3, #ARGV, 20 do
  local id, op = ARGV[i], ARGV[i + 2]
  local ukey, period, ustates = ARGV[i + 10], num(ARGV[i + 11]), ARGV[i + 12]
  if period > 0 then
    ukey = ukey .. ':' .. fmt(period) .. ':' .. fmt(math.floor((now - num(ARGV[i + 13])) / period))
  end
  local existing, stage, run_at, srun_at, lkey, lmax, g = false, 'enqueue', nil, nil, '', '', ''
  local limited, taken, waiting = false, nil, nil
  if op ~= '' then existing = op_holder(op) end
  if resubmit and not existing and redis.call('EXISTS', jobkey(id)) == 1 then existing = id end
  if not existing and ukey ~= '' then
    local holder = redis.call('HGET', uniqk, ukey)
    if holder and holds(holder, ukey) then existing, stage = holder, 'unique' end
  end
  if existing then
    if not resubmit then
      tallied('deduplicated_' .. stage)
      event({type = 'deduplicated', stage = stage, job = existing, op = op})
    end
    if stage == 'unique' then
      -- the holder's operation id with its id: the one given names no job
      reply[#reply + 1], reply[#reply + 2] = 3, {existing, redis.call('HGET', jobkey(existing), 'op') or ''}
    else
      reply[#reply + 1], reply[#reply + 2] = 0, existing
    end
  else
    local extra = {}
    if ukey ~= '' then extra = {'ukey', ukey, 'ustates', ustates} end
    lkey, lmax, g = ARGV[i + 14], ARGV[i + 15], ARGV[i + 19]
    flow_fields(extra, i + 14)
    if g ~= '' then extra[#extra + 1] = 'group'; extra[#extra + 1] = g end
    -- The keys the job's enqueue touches are checked before its first
    -- write (write_new_job's, checked itself): a limit's, read here, when
    -- due now; a group's.
    local ok = true
    limited = lkey ~= '' and num(ARGV[i + 8]) <= 0
    if g ~= '' then
      ok = not foreign('zset', limited and {group_key(g), limit_holders(lkey), limit_waiting(lkey)} or {group_key(g)})
    elseif limited then
      taken, waiting = flow_pre(lkey)
      ok = taken ~= nil
    end
    if ok then run_at, srun_at = write_new_job(i, extra) end
    if not run_at then reply[#reply + 1], reply[#reply + 2] = 4, id end
  end
  if not existing and run_at then
    if op ~= '' and id ~= op_named(op) then redis.call('SET', opkey(op), id) end
    if ukey ~= '' then redis.call('HSET', uniqk, ukey, id) end
    if g ~= '' then
      -- Promised a permit or parked (woken into the due index, outside its
      -- group's turn) only when it would lead its group: a job behind
      -- others in its group's index is not due, and a promise would hold
      -- the key's permits from other groups' jobs until it leads.
      group_enqueue(id, g, run_at, limited and function() return flow_enqueue(id, lkey, lmax) end)
    elseif limited and flow_enqueue(id, lkey, lmax, taken, waiting) then
      -- parked on its limit
    else
      due[#due + 1], due[#due + 2] = srun_at, id
    end
    if resubmit then
      tallied('resubmitted')
      event({type = 'resubmitted', job = id, op = op})
    end
    created = created + 1
    reply[#reply + 1], reply[#reply + 2] = limit_parked[id] and 2 or 1, id
  end
end
group_enqueue_done()
return enqueue_reply(reply, created, due)
