-- group_repair.lua: give every fair group of the queue a head in the due
-- index (group.lua). A group whose head is not there (its record or its
-- due-index entry lost: an eviction, a key deleted by hand, a ledger that
-- went back) would otherwise wait until its next enqueue: a head whose
-- record is still pending returns to the due index, else the group's next
-- job becomes its head (group_promote; none left: the group is forgotten).
-- A head whose entry is scored beyond any due time a write makes (more than
-- 101 x 366 days ahead, past jobs.MaxDelay: edited by hand, +inf, 1e300)
-- holds up its group the same way, its turn never coming: it is put back at its due time (the record's run_at when
-- sane, else now) and named in the reply; an entry with no pending head of
-- the group behind it (its record gone or in another state) is dropped and
-- the group's next job leads, as for a lost head. A head scheduled that far
-- ahead (jobs.RunAt) is scored at its run_at and left as it is.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 HSCAN cursor of the groups hash ('0' to start)   3 HSCAN COUNT
-- Reply: {next cursor ('0' when the scan is complete), groups repaired,
--         ids of the heads scored far ahead put back...}
queue_guard()
local res = redis.call('HSCAN', P .. 'groups', ARGV[2], 'COUNT', num(ARGV[3]))
local kv, fixed, far = res[2], 0, {}
-- No write scores an entry this far ahead (jobs.MaxDelay is 100 years; a
-- retry put off by RetryAfter, or a head its rate defers, may lie more
-- than a year ahead and is left alone), nor writes such a run_at.
local LATEST = now + 101 * 366 * 86400000
for i = 1, #kv, 2 do
  local g, head = kv[i], kv[i + 1]
  if string.sub(g, 1, 1) ~= '#' then
    local s = redis.call('ZSCORE', index['pending'], head)
    if not s then
      fixed = fixed + 1
      local h = jobread(jobkey(head), 'state', 'group', 'wait', 'run_at')
      if h[1] == 'pending' and h[2] == g and not h[3] then
        redis.call('ZADD', index['pending'], fmt(math.max(num(h[4]), now)), head)
      else
        group_promote(g)
      end
    else
      -- a score Lua cannot read ('inf') is as far ahead as can be
      local sc = tonumber(s) or math.huge
      if sc > LATEST then
        local h = jobread(jobkey(head), 'state', 'group', 'wait', 'run_at')
        local ra, at = tonumber(h[4]), now
        if ra and ra > now and ra <= LATEST then at = ra end
        if not (h[1] == 'pending' and h[2] == g and not h[3]) then
          -- no pending head of the group behind the entry: as a lost head
          fixed = fixed + 1
          if not h[1] then count('dropped_missing') end
          redis.call('ZREM', index['pending'], head)
          group_promote(g)
        elseif sc > at then
          fixed = fixed + 1
          far[#far + 1] = head
          redis.call('ZADD', index['pending'], fmt(at), head)
        end
      end
    end
  end
end
if fixed > 0 then
  seq_bump()
  count('groups_repaired', fixed)
  wake()
end
local out = {res[1], fixed}
for _, id in ipairs(far) do out[#out + 1] = id end
return out
