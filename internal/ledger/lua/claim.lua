-- claim.lua: the fenced claim. Takes up to N due pending jobs of the queue
-- and starts an attempt on each: a new token max(stored + 1, (epoch << 52) +
-- Redis TIME in µs) (internal/epoch), owner, lease deadline now + ttl,
-- attempt count + 1. A storage mark recorded by raise.lua lifts the stored
-- token first, so the new token is above it.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua); KEYS 2 the epoch record.
-- ARGV 2 owner (pool id)   3 lease ttl ms   4 at most this many jobs
--      5 replication id of the primary the caller's epoch is for ('' when epochs are off)
--      6 the caller's epoch   7 the birth of the record it was learned from (internal/epoch)
-- Reply: {paused, next due in ms, claimed count, seq, seq raised, enqueued,
--         lease deadline ms, history, claimed..., dropped...}
--        {-1, replication id, recorded epoch} when due jobs were found but the
--        caller must refresh its epoch (internal/epoch): nothing was written
--   paused: 1 when the queue is paused (nothing is claimed)
--   seq, seq raised (1/0), enqueued, history: the write sequence (seq_bump in prelude.lua)
--   next due in ms: how long until the earliest pending job left is due, by
--            Redis time (0: one is due now; -1: none left)
--   lease deadline ms: every claimed job's (0 when none was claimed)
--   claimed: 7 values per job: id, token, attempt, payload, kind, max retries,
--            then 0 when the job has none of the optional fields, else an
--            array of them: operation id ('' = the job id), resource,
--            timeout ms, times the job was put back because no pool knew
--            its kind, headers ('' = none). (Each reply value costs Redis
--            about as much as a field read.)
--   dropped: 2 values per index entry that was not claimable and was removed
--            from the due index: id, why ('missing', 'corrupt': a state no job
--            has, 'corrupt_flow': flow fields no limit or rate has, or a key of
--            its limit or rate holding another type, the job
--            moved to review in both, or the job's state), or a
--            job held back by flow control: id, 'limit:<name>' (parked until a
--            permit frees) or 'rate:<name>' (due again at its next start)
if redis.call('EXISTS', pausedk) == 1 then
  local s, b, e, h = seq_reply()
  return {1, -1, 0, s, b, e, 0, h}
end
local owner, ttl = ARGV[2], num(ARGV[3])
local max = num(ARGV[4])
local ids = redis.call('ZRANGEBYSCORE', index['pending'], '-inf', snow, 'LIMIT', '0', ARGV[4])
local ep = 0
if #ids > 0 then
  -- Only a claim that mints checks the epoch (an idle poll runs no INFO).
  local stale
  ep, stale = epoch_check(KEYS[2], ARGV[5], ARGV[6], ARGV[7], epoch_rec, epoch_born)
  if not ep then return {-1, stale[1], stale[2]} end
  call_chunked('ZREM', index['pending'], ids, 1000)
  seq_bump()
end
local mint = minter(ep)
local call = redis.call
local dropped, running, nrun = {}, {}, 0
local deadline = now + ttl
local sdeadline = fmt(deadline)
-- the reply's claimed values are written in place after its 8-value header
local reply, r = {0, -1, 0, 0, 0, 0, 0, ''}, 8
-- ids grows while it is read when fair groups fill the batch (group.lua)
local NONE = {} -- no optional fields
local grouped = nil -- whether the queue has fair groups, looked at once
local i = 0
while i < #ids do
  i = i + 1
  local id = ids[i]
  local k = P .. 'job:' .. id
  -- h: the common fields the claim hands over or writes. o: the optional
  -- ones, read only when the record has more fields than the common ones
  -- present (not a job as enqueued); each field read costs about as much as
  -- a small command. 'created' and 'args' are common too, but not read (no
  -- flow control needs them: a parked job's 'created' is read when it is
  -- parked): every job the ledger writes has both (write_new_job), so they
  -- count as present. A bridged job's record has no 'args' and three
  -- bridge fields, so more is at least 2 (the full read); a record edited
  -- by hand that lacks more common fields than it has optional ones reads
  -- as negative more, the full read too.
  -- jobread, inlined on this path
  local h = redis.pcall('HMGET', k, 'state', 'token', 'attempts', 'payload', 'kind', 'max_retries')
  if h.err then h = FOREIGN end
  local present = 2 -- created, args
  for j = 1, 6 do if h[j] then present = present + 1 end end
  -- Three more fields with a 'flow' one are a concurrency limit's (flow,
  -- lkey, lmax), four with a flow 'R…' a rate limit's (flow, rkey, rmax,
  -- rper): one field read (flow.lua). One more field is most often, in a
  -- queue with fair groups, a group's (group.lua), else a delayed job's
  -- run_at (the claim needs nothing of it), headers, a timeout or a
  -- resource: one read of those four.
  local o, flow, group, known = NONE, nil, nil, false
  local more = h ~= FOREIGN and call('HLEN', k) - present or 0
  if more == 3 then
    flow = call('HGET', k, 'flow')
  elseif more == 4 then
    flow = call('HGET', k, 'flow')
    if flow and string.byte(flow) ~= 82 then flow = nil end -- not 'R': read them all
  elseif more == 1 then
    if grouped == nil then grouped = call('EXISTS', P .. 'groups') == 1 end
    if grouped then
      group = call('HGET', k, 'group')
      known = group
    end
    if not known then
      local p = call('HMGET', k, 'run_at', 'headers', 'timeout_ms', 'resource')
      known = p[1]
      if p[2] or p[3] or p[4] then
        known = true
        o = {false, p[4], p[3], false, false, false, false, p[2]}
      end
    end
  end
  if more ~= 0 and not flow and not known then
    o = call('HMGET', k, 'op', 'resource', 'timeout_ms', 'kind_defers', 'hist', 'fence', 'mark', 'headers',
      'flow', 'group')
    flow, group = o[9], o[10]
  end
  -- a job under flow control may be held back (flow.lua): parked or deferred
  local held = h[1] == 'pending' and flow and flow_admit(id, flow)
  -- a grouped job taken off the due index: its group may need a next job
  -- (group.lua). A head its rate deferred stays its group's head, back in
  -- the due index at its start: were the next job made head, each claim
  -- would defer one more of the group, its whole backlog would take the
  -- rate's starts ahead of every other group's jobs enqueued since, and
  -- the groups sharing a rate would no longer take turns. (A parked job
  -- leaves its group: the next one leads.)
  if group and not (held and not group_took_ids[id] and string.byte(held) == 114) then -- 'r': rate
    group_took(group, id)
  end
  if held == 'corrupt' or held == 'corrupt_key' then
    quarantine(id, 'pending', held == 'corrupt' and 'corrupt record: flow control fields'
      or 'corrupt flow control key: holds another type')
    dropped[#dropped + 1] = id
    dropped[#dropped + 1] = 'corrupt_flow'
  elseif held then
    dropped[#dropped + 1] = id
    dropped[#dropped + 1] = held
  elseif h[1] == 'pending' then
    local last = h[2]
    if o[7] then -- storage's mark (raise.lua): mint above it
      last = u64_max(last, o[7])
      call('HDEL', k, 'mark')
    end
    local stok = mint(last)
    local attempt = cnt(h[3]) + 1
    local sattempt = attempt == 1 and '1' or fmt(attempt)
    call('HSET', k, 'state', 'running', 'token', stok, 'owner', owner, 'deadline', sdeadline,
      'attempts', sattempt, 'started', snow)
    running[nrun + 1], running[nrun + 2] = sdeadline, id
    nrun = nrun + 2
    -- an earlier attempt's resource-lease token is not this attempt's fence
    if o[6] then call('HDEL', k, 'fence') end
    if o[5] then
      record(id, {event = 'attempt', attempt = attempt, token = stok, owner = owner})
    end
    local extra = 0
    if o ~= NONE then extra = {o[1] or '', o[2] or '', num(o[3]), cnt(o[4]), o[8] or ''} end
    reply[r + 1], reply[r + 2], reply[r + 3], reply[r + 4] = id, stok, attempt, h[4] or ''
    reply[r + 5], reply[r + 6], reply[r + 7] = h[5] or '', cnt(h[6]), extra
    r = r + 7
  elseif h[1] and not index[h[1]] and h[1] ~= 'waiting' then
    quarantine(id, 'pending')
    dropped[#dropped + 1] = id
    dropped[#dropped + 1] = 'corrupt'
  else
    local why = h[1] or 'missing'
    if why == 'succeeded' or why == 'dead' or why == 'cancelled' then
      count('deduplicated_execute')
      event({type = 'deduplicated', stage = 'execute', job = id})
      record(id, {event = 'deduplicated', stage = 'execute'})
    elseif why == 'missing' then
      count('dropped_missing')
    end
    dropped[#dropped + 1] = id
    dropped[#dropped + 1] = why
  end
  if i == #ids and #ids < max and (group_need[1] or group_cand[1]) then group_fill(ids, max) end
end
if group_need[1] or group_done[1] or group_cand[1] then group_heads() end
flow_flush() -- the starts admitted under rate limits (flow.lua)
call_chunked('ZADD', index['running'], running, 1000)
local n = (r - 8) / 7
if n > 0 then count('attempted', n) end
-- When the earliest pending job left is due (0: one is due now, so the
-- caller claims again; -1: none left). A queue with nothing due now is
-- drained for now: the next enqueue publishes a wake-up.
local next_due = -1
local first = redis.call('ZRANGE', index['pending'], 0, 0, 'WITHSCORES')
if first[2] then next_due = math.max(num(first[2]) - now, 0) end
if next_due ~= 0 then redis.call('SET', idlek, '1') end
reply[2], reply[3] = next_due, n
reply[4], reply[5], reply[6], reply[8] = seq_reply()
if n > 0 then reply[7] = deadline end
for j = 1, #dropped do reply[r + j] = dropped[j] end
return reply
