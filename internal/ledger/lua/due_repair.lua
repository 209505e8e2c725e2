-- due_repair.lua: put back the due-index entries scored more than 366 days
-- ahead (edited by hand: +inf, 1e300) that no claim would ever reach. An
-- entry whose record is pending is put back at its run_at when that is
-- sane (ahead of now, within jobs.MaxDelay), else at now; an entry whose
-- record is in another state or gone is put back at now, for the claim to
-- drop as it drops any such entry. A job scheduled that far ahead
-- (jobs.RunAt) is scored at its run_at and left as it is; a fair group's
-- head is left to group_repair.lua. The entries are read highest first, at
-- most ARGV[2] per call.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 how many entries to read
-- Reply: {entries read, ids of the entries put back...}
queue_guard()
local LATEST = now + 366 * 86400000
-- a run_at no enqueue writes (jobs.MaxDelay is 100 years) is not followed
local LATEST_RUN = now + 101 * 366 * 86400000
local es = redis.call('ZREVRANGEBYSCORE', index['pending'], '+inf', '(' .. LATEST,
  'WITHSCORES', 'LIMIT', 0, num(ARGV[2]))
local out = {#es / 2}
for i = 1, #es, 2 do
  local id = es[i]
  -- a score Lua cannot read ('inf') is as far ahead as can be
  local sc = tonumber(es[i + 1]) or math.huge
  local h = jobread(jobkey(id), 'state', 'run_at', 'group')
  if not (h[1] == 'pending' and h[3]) then
    local at = now
    local ra = tonumber(h[2])
    if h[1] == 'pending' and ra and ra > now and ra <= LATEST_RUN then at = ra end
    if sc > at then
      redis.call('ZADD', index['pending'], fmt(at), id)
      out[#out + 1] = id
    end
  end
end
if #out > 1 then wake() end
return out
