pragma solidity ^0.8.0;

interface IPythEvents {
    int32_t eventId;
    int32_t eventId;
    int32_t eventType;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int32_t eventTypeId;
    int3