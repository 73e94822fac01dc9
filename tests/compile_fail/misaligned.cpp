// Must not compile: a record must be declared alignas(16).
#include <tapeflow/tape.hpp>

struct bad_record {
  float values[4];
};

int main()
{
  tapeflow::tape t(tapeflow::backend::cpu);
  static_cast<void>(t.push(16, 4, 4).writer<bad_record>());
}
