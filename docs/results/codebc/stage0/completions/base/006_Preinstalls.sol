pragma solidity ^0.8.0;

library Preinstalls {
  "c++11"
    :
      "1.1.0.0"
    :
      "1.1.0.0"
  :
    "1.1.0.0"
}