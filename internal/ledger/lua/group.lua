-- group.lua: fair groups (jobs.Group). Linked like prelude.lua and flow.lua
-- (only the definitions a script names), so a script that names none of them,
-- and a queue without grouped jobs, pays nothing beyond the claim reading one
-- more field of each job it takes.
--
-- A grouped job carries the field 'group'. Of a group's pending jobs, one,
-- its head, is in the queue's due index (at its due time, or the time it
-- became the head, whichever is later); the others wait in the group's own
-- index by due time. Keys, derived from the queue's prefix (its hash slot):
--   P..'groups'         hash: group -> its head's job id, while the group has
--                       pending jobs; field '#n': how many jobs wait in the
--                       groups' own indexes (counted as pending); field
--                       '#t': see GROUPS_T (no group name starts with '#');
--                       the hash goes with its last group (groups_forget)
--   P..'group:'..name   zset: the group's other pending jobs -> due time (ms)
-- A claim that takes a head makes the group's next job its head, due no
-- earlier than now: behind every head that was due before, so claims rotate
-- among the groups with due jobs. A claim with room left once every due job
-- of the index is taken fills it from the groups it took heads of, in turns.
-- Retries and re-runs of a grouped job enter the due index directly (they are
-- not heads: taking one makes no new head).

local GROUPS_N = '#n'
-- GROUPS_T's value, longer than Redis's hash-max-listpack-value (64 by
-- default), makes the groups hash a hash table from its first group on: a
-- listpack (up to hash-max-listpack-entries fields, 512 by default) finds a
-- field by a scan, and a claim looks up and writes a field per group it
-- took from.
local GROUPS_T = '#t'
local GROUPS_T_VAL = 'a value longer than hash-max-listpack-value keeps this hash a hash table: O(1) lookups'
local function group_key(g) return P .. 'group:' .. g end
-- A group's index of another type (written by hand) holds no job: the
-- claim and the operator actions read it with group_read (an error there
-- would fail the call after its first write), and an enqueue leaves out a
-- job of its group (checked before the job's first write).
local function group_read(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then return nil end
  return r
end

-- An enqueue of many jobs batches its groups' writes: group_batch holds,
-- per group met, its head's due time and the jobs to add to its index
-- (flat score, id pairs); group_parked the jobs added to the groups'
-- indexes (one HINCRBY of '#n'). group_enqueue_done writes them.
local group_batch, group_parked = {}, 0

local function group_park_flush(g, st)
  if st.park[1] then
    call_chunked('ZADD', group_key(g), st.park, 1000)
    st.park = {}
  end
end

-- group_enqueue indexes new pending job id of group g, due at run_at: as the
-- group's head when it has none in the due index (or the job is due before
-- it), else in the group's index. parks (false: none) is called only when id
-- would become the head, before anything is written: when it returns true
-- (flow.lua parked the job on its limit) the group is left as it was. A job
-- that goes to the group's index is not due, so it is neither promised a
-- permit nor parked there: the claim admits it once it leads.
local function group_enqueue(id, g, run_at, parks)
  local st = group_batch[g]
  if st and run_at >= st.hs then -- behind the head this call knows
    st.park[#st.park + 1], st.park[#st.park + 2] = fmt(run_at), id
    group_parked = group_parked + 1
    return
  end
  if st then group_park_flush(g, st) end
  local gsk = P .. 'groups'
  local head = redis.call('HGET', gsk, g)
  local hs = head and redis.call('ZSCORE', index['pending'], head)
  local gk = group_key(g)
  if hs and run_at >= num(hs) then
    group_batch[g] = {hs = num(hs), park = {fmt(run_at), id}}
    group_parked = group_parked + 1
    return
  end
  if hs then -- due before the head: the head waits behind it
    if parks and parks() then return end
    redis.call('ZREM', index['pending'], head)
    redis.call('ZADD', gk, hs, head)
    group_parked = group_parked + 1
  else
    -- no head in the due index (an idle group, or a head lost with its
    -- record or its entry): the group's earliest job leads. A head that
    -- lost only its entry (still a pending job of the group, not parked)
    -- joins the group's index first: replaced as head, it would be in no
    -- index at all, and the repair looks only at heads.
    if head then
      local h = jobread(jobkey(head), 'state', 'group', 'wait', 'run_at')
      if h[1] == 'pending' and h[2] == g and not h[3] and redis.call('ZADD', gk, 'NX', fmt(num(h[4])), head) == 1 then
        group_parked = group_parked + 1
      end
    end
    local e = redis.call('ZRANGE', gk, 0, 0, 'WITHSCORES')
    if e[1] and num(e[2]) < run_at then
      redis.call('ZREM', gk, e[1])
      redis.call('ZADD', gk, fmt(run_at), id)
      id, run_at = e[1], math.max(num(e[2]), now)
    elseif parks and parks() then
      return
    end
  end
  redis.call('HSET', gsk, g, id, GROUPS_T, GROUPS_T_VAL)
  redis.call('ZADD', index['pending'], fmt(run_at), id)
  group_batch[g] = {hs = run_at, park = {}}
end

-- group_enqueue_done writes what group_enqueue batched.
local function group_enqueue_done()
  for g, st in pairs(group_batch) do group_park_flush(g, st) end
  if group_parked ~= 0 then redis.call('HINCRBY', P .. 'groups', GROUPS_N, group_parked) end
end

-- groups_forget drops the groups hash gsk once a group left it and no group
-- is left: only its bookkeeping fields ('#n' at 0, '#t') would stay, for
-- ever on a queue whose groups all drained. Called where a group is
-- forgotten, never per job.
local function groups_forget(gsk)
  local n = redis.call('HLEN', gsk)
  if n > 2 then return end
  local f = redis.call('HMGET', gsk, GROUPS_N, GROUPS_T)
  if (f[1] and 1 or 0) + (f[2] and 1 or 0) == n and num(f[1] or '0') == 0 then redis.call('DEL', gsk) end
end

-- group_promote makes group g's next job its head, due no earlier than now,
-- or forgets the group when it has none (an idle group keeps no key). Jobs
-- whose record is gone (deleted by hand, evicted) are dropped on the way
-- (counted as dropped_missing): a claim that drops a lost head cannot tell
-- its group, so each would leave the group without a head until the next
-- repair.
local function group_promote(g)
  local gsk, gk = P .. 'groups', group_key(g)
  while true do
    local e = group_read('ZPOPMIN', gk) or {}
    if not e[1] then
      redis.call('HDEL', gsk, g)
      groups_forget(gsk)
      return
    end
    redis.call('HINCRBY', gsk, GROUPS_N, -1)
    if redis.call('EXISTS', jobkey(e[1])) == 1 then
      redis.call('HSET', gsk, g, e[1])
      redis.call('ZADD', index['pending'], fmt(math.max(num(e[2]), now)), e[1])
      return
    end
    count('dropped_missing')
  end
end

-- group_unpark takes pending job id of group g out of the group's index (an
-- operator made it due: it enters the due index itself); true when it was there.
local function group_unpark(id, g)
  if (group_read('ZREM', group_key(g), id) or 0) == 0 then return false end
  redis.call('HINCRBY', P .. 'groups', GROUPS_N, -1)
  return true
end

-- group_leave is called when pending job id of group g stops being pending
-- outside a batch claim (cancelled, claimed by id): out of the group's index,
-- or, when it was the head, the next job becomes the head.
local function group_leave(id, g)
  if not group_unpark(id, g) and redis.call('HGET', P .. 'groups', g) == id then group_promote(g) end
end

-- The claim's bookkeeping (claim.lua): group_need lists the groups whose
-- head (or a job taken from the group's index) it took, in the order taken;
-- group_cand holds (group, id) pairs of grouped jobs taken off the due index
-- not yet checked against their group's head (group_resolve checks them all
-- with one HMGET); group_done lists the groups group_fill met; group_popped
-- counts the jobs taken out of the groups' indexes (one HINCRBY of '#n');
-- group_next holds, per group group_fill met, a due job it took out of the
-- group's index for the group's next head.
local group_need, group_needs, group_cand, group_took_ids, group_done, group_popped = {}, {}, {}, {}, {}, 0
local group_next = {}

local function group_add_need(g)
  if group_needs[g] then return end
  group_needs[g] = true
  group_need[#group_need + 1] = g
end

-- group_took records that the claim took job id of group g off the due index
-- (claimed, held back or dropped): when id was the head, or was taken from
-- the group's index by group_fill, the group needs a next job.
local function group_took(g, id)
  if group_took_ids[id] then
    group_add_need(g)
  else
    group_cand[#group_cand + 1] = g
    group_cand[#group_cand + 1] = id
  end
end

-- group_resolve adds to group_need the groups of group_cand whose head was
-- taken.
local function group_resolve()
  if not group_cand[1] then return end
  local gs = {}
  for j = 1, #group_cand, 2 do gs[#gs + 1] = group_cand[j] end
  for c = 1, #gs, 1000 do -- within Lua's unpack limit
    local heads = redis.call('HMGET', P .. 'groups', unpack(gs, c, math.min(c + 999, #gs)))
    for j = 1, #heads do
      if heads[j] == group_cand[2 * (c + j - 1)] then group_add_need(gs[c + j - 1]) end
    end
  end
  group_cand = {}
end

-- group_fill, once the claim processed every id it has, fills the room left
-- (max - #ids) from the groups in group_need, in turns: each gives up to an
-- equal share of its due jobs, appended to ids (they are claimed as if read
-- from the due index). Called only while the due index has nothing due left,
-- so no other job is passed over. Every group it met goes to group_done: its
-- next head is made by group_heads, from the one more due job each group
-- gives when it has it (group_next). The group's index is read by score
-- without scores (a ZPOPMIN's reply formats each score as a double) and the
-- jobs read are its lowest ranks: one ZREMRANGEBYRANK removes them.
local function group_fill(ids, max)
  group_resolve()
  if not group_need[1] then return end
  local need = group_need
  group_need, group_needs = {}, {}
  local per = math.max(1, math.floor((max - #ids) / #need))
  for _, g in ipairs(need) do
    local room = max - #ids
    if room > 0 then
      local want = math.min(per, room)
      local got = {}
      if group_next[g] then got[1] = group_next[g]; group_next[g] = nil end
      local gk = group_key(g)
      local e = group_read('ZRANGEBYSCORE', gk, '-inf', now, 'LIMIT', 0, want + 1 - #got) or {}
      if e[1] then
        redis.call('ZREMRANGEBYRANK', gk, 0, #e - 1)
        group_popped = group_popped + #e
        for j = 1, #e do got[#got + 1] = e[j] end
      end
      for j = 1, math.min(want, #got) do
        ids[#ids + 1] = got[j]
        group_took_ids[got[j]] = true
      end
      group_next[g] = got[want + 1]
    end
    group_done[#group_done + 1] = g
  end
end

-- group_heads, at the end of a claim, gives every group that needs one its
-- next head, due no earlier than now (group_promote, with the writes of all
-- the groups batched: one HSET, one HDEL, one ZADD).
local function group_heads()
  group_resolve()
  local seen, set, gone, due, popped = {}, {}, {}, {}, group_popped
  for _, list in ipairs({group_need, group_done}) do
    for _, g in ipairs(list) do
      if not seen[g] then
        seen[g] = true
        local id, at = group_next[g], snow
        if not id then
          -- one call: cheaper than a read and a removal without the score
          local e = group_read('ZPOPMIN', group_key(g)) or {}
          id = e[1]
          if id then
            popped = popped + 1
            local t = num(e[2])
            if t > now then at = fmt(t) end
          end
        end
        if id then
          set[#set + 1], set[#set + 2] = g, id
          due[#due + 1], due[#due + 2] = at, id
        else
          gone[#gone + 1] = g
        end
      end
    end
  end
  local gsk = P .. 'groups'
  if popped > 0 then redis.call('HINCRBY', gsk, GROUPS_N, -popped) end
  if set[1] then
    call_chunked('HSET', gsk, set, 1000)
    call_chunked('ZADD', index['pending'], due, 1000)
  end
  if gone[1] then
    call_chunked('HDEL', gsk, gone, 1000)
    groups_forget(gsk)
  end
end
