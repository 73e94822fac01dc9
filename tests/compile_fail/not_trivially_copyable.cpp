// Must not compile: a record with a non-trivial copy is rejected at compile time.
#include <tapeflow/tape.hpp>

#include <string>

struct alignas(16) bad_record {
  std::string name;
};

int main()
{
  tapeflow::tape t(tapeflow::backend::cpu);
  t.push<bad_record>(4, 4);
}
