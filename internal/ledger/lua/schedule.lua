-- schedule.lua (prepended with internal/epoch's lib.lua): the periodic
-- scheduler's records, written only by the reconciler's leader and fenced by
-- its lease token. Every key is in the {periodic} hash slot of the namespace.
-- KEYS 1 leader high-water (highest scheduler leader token seen)
--      2 schedules set (ids)   3 the schedule's hash   4 the schedule's ticks list
-- ARGV 1 'register', 'takeover', 'ticks' or 'unconflict'   2 leader token   3 schedule id
-- register: ARGV 4 the scheduler pass's time in ms (the namespace's time;
--   0 = TIME): the creation time and the time seen, 5 the definition's digest, 6 the
--   registering pool's start in ms, 7 its id, 8.. field, value pairs of the
--   definition (schedule, tz, kind, queue, catch_up, missed_after,
--   max_catch_up, job_digest). Creates the schedule (created = ARGV 4) when absent, else
--   updates its definition; seen = now. A definition changing the recorded
--   expression or zone raises the cursor to the recorded seen (the last
--   pass under the old one): the new one does not catch up on ticks from
--   before it. A recorded definition of another
--   digest registered by a pool started later (or at the same time, with a
--   greater digest) is kept: the registration is noted as the schedule's
--   conflict (conflict_since kept while its digest stays the same) and the
--   reply is {-3, created ms}.
-- takeover: register's ARGV 4-7, then 8 the recorded digest and 9 the
--   recorded pool's start in ms as read, field pairs from 10: records the
--   definition whatever pool started last (no live pool defines the recorded
--   one any more) and removes the conflict, when the recorded definition is
--   still that one; else the reply is {-4, '0'}.
-- unconflict: ARGV 4 the conflict's digest   5 its last try (conflict_seen)
--   Removes the conflict when it is still that one; else the reply is
--   {-4, '0'}.
-- ticks: ARGV 4 ticks skipped by the catch-up policy   5 next tick ms (0 = unknown)
--        6 cursor ms: the newest tick handled (enqueued or skipped)
--        7 the scheduler pass's time in ms (the namespace's time; 0 = TIME)
--        8 n, then n times: tick ms, job id, queue, deduplicated (0/1)
--   Raises cursor and last_tick (the newest tick enqueued) to the values
--   given (never lowers them), appends each tick to the ticks list (newest
--   first, capped). Reply {-2, '0'} when the schedule is not registered.
-- Reply: {1, created ms} when written; {-1, high-water} when a newer
--        leader's token was seen (nothing written).
local TICKS_CAP = 100
local CONFLICT = {'conflict_digest', 'conflict_started', 'conflict_pool', 'conflict_seen', 'conflict_since'}
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local function fmt(n) return string.format('%d', n) end
local function num(s) return tonumber(s) or 0 end
-- Times recorded are the pass's (the namespace's time, which the dashboard
-- measures ages by), not this node's TIME: they differ by the primary
-- tenure's offset after a failover to a node whose clock is off.
local pass = 0
if ARGV[1] == 'register' or ARGV[1] == 'takeover' then pass = num(ARGV[4]) elseif ARGV[1] == 'ticks' then pass = num(ARGV[7]) end
if pass > 0 then now = pass end

-- Leader tokens of fencing epoch 2 and up are above 2^53, where Lua numbers
-- are not exact: compared as decimal strings (internal/epoch's lib.lua).
-- A key of another type (written by hand) fails the call before its first
-- write: a register failing at the schedules set after writing 'created'
-- would leave the schedule out of the set for good (the next register finds
-- it created).
for i, want in ipairs({'string', 'set', 'hash', 'list'}) do
  local t = redis.call('TYPE', KEYS[i])['ok']
  if t ~= 'none' and t ~= want then
    return redis.error_reply('FOREIGNKEY the key ' .. KEYS[i] .. ' holds another type than a ' .. want ..
      ': nothing was written')
  end
end
local hw = redis.call('GET', KEYS[1])
if hw and u64_cmp(u64_norm(hw), u64_norm(ARGV[2])) > 0 then return {-1, hw} end
redis.call('SET', KEYS[1], ARGV[2])

local key = KEYS[3]
if ARGV[1] == 'register' or ARGV[1] == 'takeover' then
  local rec = redis.call('HMGET', key, 'digest', 'started', 'created', 'pool', 'schedule', 'tz', 'seen', 'cursor')
  local digest, started, pool = ARGV[5], num(ARGV[6]), ARGV[7]
  local first = 8
  if ARGV[1] == 'takeover' then
    if (rec[1] or '') ~= ARGV[8] or num(rec[2]) ~= num(ARGV[9]) then return {-4, '0'} end
    first = 10
    redis.call('HDEL', key, unpack(CONFLICT))
  elseif rec[1] and rec[1] ~= '' and rec[1] ~= digest then
    local rs = num(rec[2])
    if rs > started or (rs == started and rec[1] > digest) then
      if redis.call('HGET', key, 'conflict_digest') ~= digest then
        redis.call('HSET', key, 'conflict_since', fmt(now))
      end
      redis.call('HSET', key, 'conflict_digest', digest, 'conflict_started', ARGV[6], 'conflict_pool', pool,
        'conflict_seen', fmt(now))
      return {-3, rec[3] or '0'}
    end
    redis.call('HDEL', key, unpack(CONFLICT))
  elseif rec[1] == digest and num(rec[2]) > started then
    started, pool = num(rec[2]), rec[4] or '' -- the most recently started pool defining it so
  end
  local created = fmt(now)
  if redis.call('HSETNX', key, 'created', created) == 1 then
    redis.call('SADD', KEYS[2], ARGV[3])
  end
  local f = {'seen', fmt(now), 'leader', ARGV[2], 'digest', digest, 'started', fmt(started), 'pool', pool}
  local def = {}
  for i = first, #ARGV, 2 do
    f[#f + 1] = ARGV[i]
    f[#f + 1] = ARGV[i + 1]
    def[ARGV[i]] = ARGV[i + 1]
  end
  -- Another expression or zone runs from now on: its ticks up to the last
  -- pass under the recorded one (seen) fell while that one was in force,
  -- and are not missed ticks to catch up on.
  if rec[5] and (rec[5] ~= def['schedule'] or (rec[6] or '') ~= (def['tz'] or '')) and num(rec[7]) > num(rec[8]) then
    f[#f + 1] = 'cursor'
    f[#f + 1] = rec[7]
  end
  redis.call('HSET', key, unpack(f))
  return {1, redis.call('HGET', key, 'created')}
end

if redis.call('EXISTS', key) == 0 then return {-2, '0'} end
if ARGV[1] == 'unconflict' then
  local c = redis.call('HMGET', key, 'conflict_digest', 'conflict_seen')
  if c[1] ~= ARGV[4] or c[2] ~= ARGV[5] then return {-4, '0'} end
  redis.call('HDEL', key, unpack(CONFLICT))
  return {1, redis.call('HGET', key, 'created')}
end
-- add_count adds d to count field f of the schedule's record; one edited
-- by hand into something else than a whole number reads as 0 (not
-- HINCRBY, which fails on it after the pass's ticks were appended, so
-- every pass failed and the cursor never moved), one beyond 2^53 as 2^53.
local function add_count(f, d)
  local c = tonumber(redis.call('HGET', key, f))
  if not c or not (c >= 0) then c = 0 end -- NaN fails the comparison
  c = math.min(c - c % 1, 2 ^ 53)
  redis.call('HSET', key, f, fmt(c + d))
end
local last = num(redis.call('HGET', key, 'last_tick'))
local n = num(ARGV[8])
for i = 0, n - 1 do
  local b = 9 + i * 4
  local tick = num(ARGV[b])
  redis.call('LPUSH', KEYS[4], cjson.encode({tick = ARGV[b], job = ARGV[b + 1], queue = ARGV[b + 2],
    dedup = ARGV[b + 3], at = fmt(now), leader = ARGV[2]}))
  if tick >= last then
    last = tick
    redis.call('HSET', key, 'last_tick', ARGV[b], 'last_job', ARGV[b + 1])
  end
end
redis.call('LTRIM', KEYS[4], 0, TICKS_CAP - 1)
if n > 0 then add_count('enqueued', n) end
if num(ARGV[4]) > 0 then add_count('skipped', num(ARGV[4])) end
if num(ARGV[5]) > 0 then redis.call('HSET', key, 'next_tick', ARGV[5]) end
if num(ARGV[6]) > num(redis.call('HGET', key, 'cursor')) then redis.call('HSET', key, 'cursor', ARGV[6]) end
redis.call('HSET', key, 'updated', fmt(now), 'leader', ARGV[2])
return {1, redis.call('HGET', key, 'created')}
