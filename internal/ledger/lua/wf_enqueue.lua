-- wf_enqueue.lua: write the steps of one workflow that live in this queue.
-- A workflow spanning queues is written queue by queue: first every other
-- queue (mode 'part': steps written waiting, roots waiting for '@start'),
-- then the home queue (mode 'home'), whose call is the commit: it
-- deduplicates by the workflow's operation id, writes the workflow record,
-- its own steps, and the hand-over records releasing the other queues'
-- roots (delivered like any hand-over). Steps are written only where their
-- id is new, so a retried enqueue never doubles one. A part call notes the
-- steps it wrote in P .. 'wf_part' (workflow id -> JSON {home, ids}) and
-- P .. 'wf_parts' (by first write): the maintenance leader cancels the steps
-- of a workflow never committed (AbandonUncommitted).
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 workflow id   3 mode ('home' | 'part' | 'confirm')   4 workflow operation id ('' none)
--      5 workflow record (JSON; home)   6 other queues' roots (JSON list of [queue, job id]; home)
--      7 the home queue, then 19 values per step: the 10 of enqueue.lua, step name,
--      dependents (JSON list of {q, id}; '' none), dependencies (JSON list of step
--      names; '[]' for a root of the home queue), dependencies allowed to fail
--      (JSON object name → true; '' none), then the five flow values of
--      enqueue_unique.lua (limit key, limit max, rate key, rate max, rate period
--      ms; '' keys: none). A step under flow control is held back by the claim
--      that takes it (flow.lua), like a job that became due later.
-- Reply: {created (1) or deduplicated (0), workflow id, first (see enqueue.lua),
--   seq, seq raised, enqueued, hand-over records written, steps created, history}
--   (a deduplicated home call writes nothing and returns 0 for the rest)
-- Modes 'part_revive' and 'home_revive' are 'part' and 'home' for a
-- client's re-submission of a workflow it saw acknowledged whose commit a
-- rewind lost, after the maintenance leader abandoned it (record and steps
-- cancelled by ABANDONED): the home call replaces that record (keeping
-- 'seen', the workflow counted started), and each call puts the steps
-- abandon cancelled back to waiting for what they waited for (pending when
-- that is nothing), the ends abandon handed on and not yet moved withdrawn.
-- Mode 'confirm' (an enqueue whose read found the workflow) is the home
-- call's deduplication alone: a write, refused by a read-only replica (a
-- demoted primary's stale data is no acknowledgement), whose event the wait
-- for replicas covers in durable mode; a workflow not there (pruned since,
-- or lost) writes nothing, reply {1, ''}.
-- part_note decodes a part note (wf_part) as AbandonUncommitted reads it
-- (a JSON object: home a string, ids an array of strings, rev a number,
-- each optional); nil when it is anything else (edited by hand).
local function part_note(raw)
  local ok, p = pcall(cjson.decode, raw)
  if not ok or type(p) ~= 'table' or next(p) ~= nil and p[1] ~= nil then return nil end
  if p.home == nil or p.home == cjson.null then p.home = '' end
  if p.ids == nil or p.ids == cjson.null then p.ids = {} end
  if type(p.home) ~= 'string' or type(p.ids) ~= 'table' or (p.rev ~= nil and type(p.rev) ~= 'number') then return nil end
  local n = 0
  for k, v in pairs(p.ids) do
    n = n + 1
    if type(k) ~= 'number' or type(v) ~= 'string' then return nil end
  end
  if n ~= #p.ids then return nil end
  return p
end
local wfid, op = ARGV[2], ARGV[4]
local home = ARGV[3] == 'home' or ARGV[3] == 'home_revive' or ARGV[3] == 'confirm'
local revive = ARGV[3] == 'part_revive' or ARGV[3] == 'home_revive'
local ABANDONED = 'maintenance:never committed' -- ledger.UncommittedActor
local reply = {1, wfid, 0, 0, 0, 0}
local wfk = P .. 'wf:' .. wfid
-- the record abandon wrote, replaced by this commit
local replace = home and revive and redis.call('TYPE', wfk)['ok'] == 'hash' and
  redis.call('HGET', wfk, 'cancel') == ABANDONED
if home and not replace then
  local existing = false
  if op ~= '' then existing = redis.call('GET', P .. 'wfop:' .. op) end
  if not existing then
    local t = redis.call('TYPE', wfk)['ok']
    if t == 'hash' then
      existing = wfid
    elseif t ~= 'none' then
      return redis.error_reply('FENCEDQ foreign key: the record of workflow ' .. wfid .. ' holds another type')
    end
  end
  if existing then
    tallied('deduplicated_enqueue')
    event({type = 'deduplicated', stage = 'enqueue', workflow = existing, op = op})
    flush_tally()
    reply[1], reply[2] = 0, existing
    reply[7], reply[8] = 0, 0
    return reply
  end
  if ARGV[3] == 'confirm' then return {1, ''} end
end
-- A step whose operation id names another job (an enqueue that raced
-- EnqueueWorkflow's check), or whose record or waits set holds another
-- type (written by hand), refuses the call before it writes anything.
local fresh = {} -- the steps to write: no record yet
for i = 8, #ARGV, 19 do
  local sop = ARGV[i + 2]
  if sop ~= '' then
    local holder = op_holder(sop)
    if holder and holder ~= ARGV[i] then
      return redis.error_reply('FENCEDQ step ' .. ARGV[i + 10] .. ': operation id ' .. sop .. ' already names job ' .. holder)
    end
  end
  local t = redis.call('TYPE', jobkey(ARGV[i]))['ok']
  fresh[i] = t == 'none'
  if (t ~= 'none' and t ~= 'hash') or (fresh[i] and ARGV[i + 12] ~= '[]' and foreign('set', {wf_waitsk(ARGV[i])})) then
    return redis.error_reply('FENCEDQ foreign key: step ' .. ARGV[i + 10] .. ' (job ' .. ARGV[i] .. ') has a key holding another type')
  end
end
-- The note of the workflow's steps in this queue, read before any write:
-- one a part call will write to (a step to write or revive) that is not
-- what it writes (edited by hand) refuses the call, which would otherwise
-- fail at the note after writing its steps, every try.
local part -- {home, ids, rev}: what this call notes
if not home then
  local noting = revive
  for i = 8, #ARGV, 19 do noting = noting or fresh[i] end
  local cur = noting and redis.call('HGET', P .. 'wf_part', wfid)
  if cur then
    part = part_note(cur)
    if not part then
      return redis.error_reply('FENCEDQ foreign key: the note of workflow ' .. wfid ..
        "'s steps in this queue (wf_part) does not parse")
    end
  else
    part = {home = ARGV[7], ids = {}}
  end
end
queue_guard(nil, replace and {{P .. 'wf_done', 'zset'}} or nil)
seq_bump()
-- revived puts step id back as its workflow's enqueue left it, when
-- abandon cancelled it: true then
local function revived(id)
  local k = jobkey(id)
  local h = redis.call('HMGET', k, 'wf', 'state', 'wf_cancel', 'step', 'wf_next', 'wf_home', 'op', 'run_at')
  if h[1] ~= wfid or h[2] ~= 'cancelled' or h[3] ~= ABANDONED then return false end
  local ok, next = pcall(cjson.decode, h[5] or '[]')
  if ok and type(next) == 'table' then
    for _, d in ipairs(next) do
      if d.q ~= wf_queue then redis.call('HDEL', P .. 'handover', d.q .. '\n' .. d.id .. '\n' .. h[4]) end
    end
  end
  if h[6] and h[6] ~= wf_queue then redis.call('HDEL', P .. 'handover', h[6] .. '\n@wf:' .. wfid .. '\n' .. h[4]) end
  wf_unkeep(id)
  unfinish(id, h[7])
  redis.call('ZREM', index['cancelled'], id)
  redis.call('HDEL', k, 'wf_cancel', 'finished', 'reason', 'wf_cause')
  redis.call('HSET', k, 'wf_home', ARGV[7])
  if redis.call('SCARD', wf_waitsk(id)) > 0 then
    redis.call('HSET', k, 'state', 'waiting')
    redis.call('ZADD', wf_waitk(), snow, id)
  else
    local due = snow
    if h[8] and num(h[8]) > now then due = h[8] end
    redis.call('HSET', k, 'state', 'pending')
    redis.call('ZADD', index['pending'], due, id)
    wake()
  end
  record(id, {event = 'resumed', reason = 'workflow re-submitted after a ledger rewind'})
  return true
end
local created, due, ids = 0, {}, {}
for i = 8, #ARGV, 19 do
  local id = ARGV[i]
  if fresh[i] then
    local extra = {'wf', wfid, 'step', ARGV[i + 10], 'wf_home', ARGV[7]}
    if ARGV[i + 11] ~= '' then extra[#extra + 1] = 'wf_next'; extra[#extra + 1] = ARGV[i + 11] end
    if ARGV[i + 13] ~= '' then extra[#extra + 1] = 'wf_allow'; extra[#extra + 1] = ARGV[i + 13] end
    flow_fields(extra, i + 14)
    local deps = cjson.decode(ARGV[i + 12])
    if #deps > 0 then
      extra[#extra + 1] = 'state'; extra[#extra + 1] = 'waiting'
    end
    local run_at, srun_at = write_new_job(i, extra)
    if ARGV[i + 2] ~= '' and not op_holder(ARGV[i + 2]) then
      redis.call('SET', opkey(ARGV[i + 2]), id)
    end -- else this step's own id names it (checked above)
    if #deps > 0 then
      redis.call('SADD', wf_waitsk(id), unpack(deps))
      redis.call('ZADD', wf_waitk(), snow, id)
    else
      due[#due + 1] = srun_at
      due[#due + 1] = id
    end
    created = created + 1
    ids[#ids + 1] = id
  elseif revive and revived(id) then
    created = created + 1
    ids[#ids + 1] = id
  elseif revive and not home then
    ids[#ids + 1] = id -- noted again: see below
  elseif not home then
    -- Left waiting by a try that never committed: when its home was
    -- another partition of the home queue (the layout changed since), the
    -- step reads the workflow's record where this try commits it.
    local cur = redis.call('HMGET', jobkey(id), 'wf', 'wf_home', 'state')
    if cur[1] == wfid and cur[2] ~= ARGV[7] and cur[3] == 'waiting' then
      redis.call('HSET', jobkey(id), 'wf_home', ARGV[7])
    end
  end
end
-- A revive notes its steps anew (another value, the grace from now): an
-- abandon pass that read the note before cancels none of them (cancel.lua
-- compares the note), nor forgets it; one reading it after waits for the
-- grace again.
if not home and #ids > 0 then
  local noted = {}
  for _, id in ipairs(part.ids) do noted[id] = true end
  for _, id in ipairs(ids) do
    if not noted[id] then part.ids[#part.ids + 1] = id end
  end
  if revive then part.rev = (tonumber(part.rev) or 0) + 1 end
  redis.call('HSET', P .. 'wf_part', wfid, cjson.encode(part))
  redis.call('ZADD', P .. 'wf_parts', revive and 'GT' or 'NX', snow, wfid)
end
if home then
  if replace then
    local seen = redis.call('HGET', wfk, 'seen')
    redis.call('DEL', wfk)
    redis.call('ZREM', P .. 'wf_done', wfid)
    if seen then redis.call('HSET', wfk, 'seen', seen) end
  end
  redis.call('HSET', wfk, 'def', ARGV[5], 'created', snow, 'op', op)
  if op ~= '' then redis.call('SET', P .. 'wfop:' .. op, wfid) end
  redis.call('ZADD', P .. 'workflows', snow, wfid)
  redis.call('SADD', P .. 'wf_open', wfid) -- until the maintenance leader counts its outcome
  redis.call('SADD', P .. 'wf_changed', ARGV[7] .. '\n' .. wfid) -- read by the next pass
  for _, r in ipairs(cjson.decode(ARGV[6])) do
    redis.call('HSET', P .. 'handover', r[1] .. '\n' .. r[2] .. '\n@start', 'succeeded ' .. fmt(seq_now))
    wf_handed.n = wf_handed.n + 1
  end
end
local out = enqueue_reply({0, 0, 0, 0, ''}, created, due)
reply[3], reply[4], reply[5], reply[6] = out[1], out[2], out[3], out[4]
reply[7] = wf_handed.n
reply[8] = created
reply[9] = out[5]
return reply
