pragma solidity ^0.8.13;

library LibMap {
    use std::map;
    use std::make_tuple;
    use std::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use std::make_tuple::make_tuple;
    use