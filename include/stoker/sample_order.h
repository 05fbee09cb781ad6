// The header of stoker::OrderRecipe before it was renamed (it was called
// SampleOrder, still an alias): include stoker/order_recipe.h instead.
#ifndef STOKER_SAMPLE_ORDER_H_
#define STOKER_SAMPLE_ORDER_H_

#include "stoker/order_recipe.h"

#endif  // STOKER_SAMPLE_ORDER_H_
