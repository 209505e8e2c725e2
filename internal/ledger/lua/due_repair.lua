-- due_repair.lua: put back the due-index entries scored beyond any due
-- time a write makes (edited by hand: +inf, 1e300) that no claim would
-- ever reach. Every due time the ledger writes is at most jobs.MaxDelay
-- (100 years) ahead: a job scheduled by RunAt (scored at its run_at), a
-- retry its handler or RetryDelay put off (scored at its retry, its run_at
-- left as it was), a rate's deferral. So only entries scored more than
-- 101 x 366 days ahead are read, and the entries at BRIDGE_WAIT (a bridged
-- job waiting for its queue's next delivery, prelude.lua) are not. An
-- entry whose record is pending is put back at its run_at when that is
-- sane (ahead of now, within that bound), else at now; a bridged pending
-- job's at BRIDGE_WAIT, out of native claims' reach; an entry whose record
-- is in another state or gone is put back at now, for the claim to drop
-- as it drops any such entry. A fair group's head is left to
-- group_repair.lua. The entries are read highest first, at most ARGV[2]
-- per call.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 how many entries to read
-- Reply: {entries read, ids of the entries put back...}
queue_guard()
-- beyond any due time a write makes (jobs.MaxDelay is 100 years), and a
-- run_at beyond it is not followed
local LATEST = now + 101 * 366 * 86400000
local n = num(ARGV[2])
local es = redis.call('ZREVRANGEBYSCORE', index['pending'], '+inf', '(' .. fmt(BRIDGE_WAIT),
  'WITHSCORES', 'LIMIT', 0, n)
if #es / 2 < n then
  local more = redis.call('ZREVRANGEBYSCORE', index['pending'], '(' .. fmt(BRIDGE_WAIT), '(' .. fmt(LATEST),
    'WITHSCORES', 'LIMIT', 0, n - #es / 2)
  for _, v in ipairs(more) do es[#es + 1] = v end
end
local out = {#es / 2}
for i = 1, #es, 2 do
  local id = es[i]
  -- a score Lua cannot read ('inf') is as far ahead as can be
  local sc = tonumber(es[i + 1]) or math.huge
  local h = jobread(jobkey(id), 'state', 'run_at', 'group', 'bridge')
  if not (h[1] == 'pending' and h[3]) then
    local at = now
    local ra = tonumber(h[2])
    if h[1] == 'pending' and h[4] then
      at = BRIDGE_WAIT
    elseif h[1] == 'pending' and ra and ra > now and ra <= LATEST then
      at = ra
    end
    if sc ~= at then
      redis.call('ZADD', index['pending'], fmt(at), id)
      out[#out + 1] = id
    end
  end
end
if #out > 1 then wake() end
return out
