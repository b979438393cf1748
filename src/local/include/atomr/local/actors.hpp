// The actor core: include this to define, spawn and talk to actors.
#pragma once

#include "atomr/local/actors/actor.hpp"
#include "atomr/local/actors/actor_ref.hpp"
#include "atomr/local/actors/actor_system.hpp"
#include "atomr/local/actors/future.hpp"
#include "atomr/local/actors/spawn_options.hpp"
#include "atomr/local/actors/supervision.hpp"
#include "atomr/local/actors/timer_service.hpp"
