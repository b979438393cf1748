// The actor core: include this to define, spawn and talk to actors, and to write coroutines
// (task, co_await on futures, ATOMR_CO_TRY, when_all / when_any, coroutine_actor).
#pragma once

#include "atomr/local/actors/actor.hpp"
#include "atomr/local/actors/actor_ref.hpp"
#include "atomr/local/actors/actor_system.hpp"
#include "atomr/local/actors/awaitable.hpp"
#include "atomr/local/actors/co_try.hpp"
#include "atomr/local/actors/coroutine_actor.hpp"
#include "atomr/local/actors/future.hpp"
#include "atomr/local/actors/spawn_options.hpp"
#include "atomr/local/actors/supervision.hpp"
#include "atomr/local/actors/task.hpp"
#include "atomr/local/actors/timer_service.hpp"
#include "atomr/local/actors/when_all.hpp"
#include "atomr/local/actors/when_any.hpp"
