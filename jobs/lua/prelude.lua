-- prelude.lua: shared by every ledger script (prepended at load time).
-- KEYS (the same layout for every ledger script, all in the queue's hash slot {<queue>}):
--  1 job hash       2 job history list   3 operation-id key
--  4 pending zset   5 running zset (score: lease deadline ms)   6 uncertain zset
--  7 review zset    8 succeeded zset     9 dead zset
-- 10 stats hash    11 events list (fenced rejections, deduplications)
-- 12 reconciler high-water (highest reconciler leader token seen)
local jobk, histk, opk = KEYS[1], KEYS[2], KEYS[3]
local index = {pending = KEYS[4], running = KEYS[5], uncertain = KEYS[6],
               review = KEYS[7], succeeded = KEYS[8], dead = KEYS[9]}
local statsk, eventsk, reconk = KEYS[10], KEYS[11], KEYS[12]
local HISTORY_CAP, EVENTS_CAP = 200, 1000

local tm = redis.call('TIME')
local now_us = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local now = math.floor(now_us / 1000)

local function fmt(n) return string.format('%d', n) end

-- move moves the job's id between state indexes; the caller writes the
-- 'state' and 'updated' fields in its own HSET.
local function move(id, from, to, score)
  if from and index[from] then redis.call('ZREM', index[from], id) end
  if index[to] then redis.call('ZADD', index[to], fmt(score), id) end
end

-- record appends one entry to the job's history (tokens stay strings).
local function record(entry)
  entry['at'] = fmt(now)
  if redis.call('RPUSH', histk, cjson.encode(entry)) > HISTORY_CAP then
    redis.call('LTRIM', histk, -HISTORY_CAP, -1)
  end
end

-- event appends to the queue's event feed shown by the dashboard.
local function event(entry)
  entry['at'] = fmt(now)
  if redis.call('LPUSH', eventsk, cjson.encode(entry)) > EVENTS_CAP then
    redis.call('LTRIM', eventsk, 0, EVENTS_CAP - 1)
  end
end

local function count(field, n) redis.call('HINCRBY', statsk, field, n or 1) end

-- finish applies the retention period to a job that reached a final state
-- (the caller sets the 'finished' field).
local function finish(retention_ms)
  local r = tonumber(retention_ms)
  if r and r > 0 then
    redis.call('PEXPIRE', jobk, r)
    redis.call('PEXPIRE', histk, r)
    redis.call('PEXPIRE', opk, r)
  end
end

-- reconciler_ok fences reconciler writes by the leader's lease token.
local function reconciler_ok(token)
  if token == '' then return true end
  local hw = redis.call('GET', reconk)
  if hw and tonumber(hw) > tonumber(token) then return false end
  redis.call('SET', reconk, token)
  return true
end
