-- group_repair.lua: give every fair group of the queue a head in the due
-- index (group.lua). A group whose head is not there (its record or its
-- due-index entry lost: an eviction, a key deleted by hand, a ledger that
-- went back) would otherwise wait until its next enqueue: a head whose
-- record is still pending returns to the due index, else the group's next
-- job becomes its head (group_promote; none left: the group is forgotten).
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 HSCAN cursor of the groups hash ('0' to start)   3 HSCAN COUNT
-- Reply: {next cursor ('0' when the scan is complete), groups repaired}
queue_guard()
local res = redis.call('HSCAN', P .. 'groups', ARGV[2], 'COUNT', num(ARGV[3]))
local kv, fixed = res[2], 0
for i = 1, #kv, 2 do
  local g, head = kv[i], kv[i + 1]
  if string.sub(g, 1, 1) ~= '#' and not redis.call('ZSCORE', index['pending'], head) then
    fixed = fixed + 1
    local h = jobread(jobkey(head), 'state', 'group', 'wait', 'run_at')
    if h[1] == 'pending' and h[2] == g and not h[3] then
      redis.call('ZADD', index['pending'], fmt(math.max(num(h[4]), now)), head)
    else
      group_promote(g)
    end
  end
end
if fixed > 0 then
  seq_bump()
  count('groups_repaired', fixed)
  wake()
end
return {res[1], fixed}
