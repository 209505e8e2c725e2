-- expire.lua: the reconciler moves running jobs whose lease deadline passed
-- without a commit to uncertain.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 reconciler leader token   3 at most this many jobs
-- Reply: {-1} when the reconciler's token is stale; else
--        {1, next in ms, moved count, reviewed count, lost count, moved
--        ids..., reviewed ids..., lost ids..., dropped ids...} where next in
--        is how long until the earliest running deadline left (-1: none),
--        reviewed are records holding a state no job has (moved to review:
--        quarantine in prelude.lua), lost are index entries whose record is
--        gone (evicted, deleted) and dropped those whose record is in
--        another state (both removed).
if not reconciler_ok(ARGV[2]) then return {-1} end
local moved, reviewed, lost, dropped = {}, {}, {}, {}
local reason = 'lease expired without commit'
-- A deadline is followed only when it is a sane one: a number, at most a
-- year ahead (no lease is that long). One edited by hand into infinity,
-- NaN, garbage or a far future would leave the job running for ever once
-- its pool is gone: it is taken as lapsed.
local LATEST = now + 366 * 86400000
local ids = redis.call('ZRANGEBYSCORE', index['running'], '-inf', now, 'LIMIT', 0, num(ARGV[3]))
-- The same holds for the index's own score: an entry scored beyond that
-- bound (+inf, 1e300, edited by hand) is never reached by the range above,
-- so it is taken too: its record's deadline is followed when sane, else
-- the attempt is expired.
if #ids < num(ARGV[3]) then
  local far = redis.call('ZRANGEBYSCORE', index['running'], '(' .. LATEST, '+inf', 'LIMIT', 0, num(ARGV[3]) - #ids)
  for _, id in ipairs(far) do ids[#ids + 1] = id end
end
local function ahead(d)
  local n = tonumber(d)
  return n ~= nil and n > now and n <= LATEST
end
if #ids > 0 then
  queue_guard()
  seq_bump()
end
for _, id in ipairs(ids) do
  local k = jobkey(id)
  local h = jobread(k, 'state', 'deadline', 'token', 'attempts', 'lkey', 'lmax')
  if h[1] and not index[h[1]] and h[1] ~= 'waiting' then
    quarantine(id, 'running')
    reviewed[#reviewed + 1] = id
  elseif not h[1] then
    redis.call('ZREM', index['running'], id)
    lost[#lost + 1] = id
  elseif h[1] ~= 'running' then
    redis.call('ZREM', index['running'], id)
    dropped[#dropped + 1] = id
  elseif ahead(h[2]) then
    redis.call('ZADD', index['running'], h[2], id) -- index behind the record: follow it
  else
    move(id, 'running', 'uncertain', now)
    redis.call('HSET', k, 'state', 'uncertain', 'reason', reason, 'uncertain_since', fmt(now), 'reconcile_tries', '0')
    record(id, {event = 'end', attempt = cnt(h[4]), token = h[3], outcome = 'uncertain', reason = reason})
    tallied('uncertain')
    -- the permit is reclaimed: its holder can no longer renew or complete (flow.lua)
    if h[5] then flow_release(id, h[5]) end
    moved[#moved + 1] = id
  end
end
flush_tally()
local next_in = -1
local first = redis.call('ZRANGE', index['running'], 0, 0, 'WITHSCORES')
if first[2] then next_in = math.max(math.min(num(first[2]), LATEST) - now, 0) end
local reply = {1, next_in, #moved, #reviewed, #lost}
for _, v in ipairs(moved) do reply[#reply + 1] = v end
for _, v in ipairs(reviewed) do reply[#reply + 1] = v end
for _, v in ipairs(lost) do reply[#reply + 1] = v end
for _, v in ipairs(dropped) do reply[#reply + 1] = v end
return reply
